/*
 * rm_api.c - fetches the module API function pointers declared in
 * redismodule_api.h from the server (see that header for how).
 */
#define RM_API_DEFINE
#include "redismodule_api.h"

#include <string.h>

#define RM_GET(name)                                                                 \
    do {                                                                             \
        if (RedisModule_GetApi("RedisModule_" #name, (void *)&RedisModule_##name) != \
            REDISMODULE_OK)                                                          \
            return REDISMODULE_ERR;                                                  \
    } while (0)
#define RM_GET_OPTIONAL(name)                                                          \
    do {                                                                               \
        if (RedisModule_GetApi("RedisModule_" #name, (void *)&RedisModule_##name) !=   \
            REDISMODULE_OK)                                                            \
            RedisModule_##name = NULL;                                                 \
    } while (0)

int rm_api_fetch(RedisModuleCtx *ctx)
{
    /* The first member of the server's context is the GetApi pointer.  The
     * object pointer is converted through memcpy, as ISO C has no cast from
     * object to function pointer. */
    void *getapi;
    memcpy(&getapi, (const void *)ctx, sizeof getapi);
    memcpy(&RedisModule_GetApi, &getapi, sizeof getapi);

    RM_GET(Alloc);
    RM_GET_OPTIONAL(TryAlloc);
    RM_GET(Calloc);
    RM_GET_OPTIONAL(TryCalloc);
    RM_GET(Realloc);
    RM_GET(Free);
    RM_GET(SetModuleAttribs);
    RM_GET_OPTIONAL(IsModuleNameBusy);
    RM_GET(SetModuleOptions);
    RM_GET(CreateCommand);
    RM_GET_OPTIONAL(GetCommand);
    RM_GET_OPTIONAL(SetCommandInfo);
    RM_GET_OPTIONAL(AddACLCategory);
    RM_GET_OPTIONAL(SetCommandACLCategories);
    RM_GET(Log);
    RM_GET(LogIOError);
    RM_GET(Milliseconds);
    RM_GET_OPTIONAL(GetServerInfo);
    RM_GET_OPTIONAL(FreeServerInfo);
    RM_GET_OPTIONAL(ServerInfoGetFieldUnsigned);
    RM_GET(WrongArity);
    RM_GET(ReplyWithLongLong);
    RM_GET(ReplyWithError);
    RM_GET(ReplyWithSimpleString);
    RM_GET(ReplyWithArray);
    RM_GET(ReplySetArrayLength);
    RM_GET(ReplyWithStringBuffer);
    RM_GET(ReplyWithNull);
    RM_GET(ReplyWithDouble);
    RM_GET(ReplicateVerbatim);
    RM_GET(Replicate);
    RM_GET(StringPtrLen);
    RM_GET(StringToLongLong);
    RM_GET(StringToDouble);
    RM_GET(OpenKey);
    RM_GET(CloseKey);
    RM_GET(KeyType);
    RM_GET(DeleteKey);
    RM_GET(CreateDataType);
    RM_GET(ModuleTypeSetValue);
    RM_GET(ModuleTypeGetType);
    RM_GET(ModuleTypeGetValue);
    RM_GET(SaveUnsigned);
    RM_GET(LoadUnsigned);
    RM_GET(SaveStringBuffer);
    RM_GET(LoadStringBuffer);
    RM_GET(IsIOError);
    RM_GET(SaveDouble);
    RM_GET(LoadDouble);
    RM_GET(EmitAOF);
    return REDISMODULE_OK;
}

int rm_api_register(RedisModuleCtx *ctx, const char *name, int ver, int apiver)
{
    if (RedisModule_IsModuleNameBusy && RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
    return REDISMODULE_OK;
}
