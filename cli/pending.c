/* Temporary: subcommands not yet merged into this branch.  Removed as each lands. */
#include "cli.h"
int cmd_dedup(int argc, char **argv) { (void)argc; (void)argv; cli_error("not built yet"); return CLI_EXIT_USAGE; }
