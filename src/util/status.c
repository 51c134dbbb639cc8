#include "gdte.h"
#include "util.h"

GDTE_API const char *gdte_status_string(gdte_status_t status)
{
    switch (status) {
#define GDTE_X_STR(name, value, text) case name: return text;
        GDTE_STATUS_LIST(GDTE_X_STR)
#undef GDTE_X_STR
    }
    return "unknown status";
}

GDTE_API const char *gdte_status_name(gdte_status_t status)
{
    switch (status) {
#define GDTE_X_NAME(name, value, text) case name: return #name;
        GDTE_STATUS_LIST(GDTE_X_NAME)
#undef GDTE_X_NAME
    }
    return "GDTE_STATUS_UNKNOWN";
}

/* Names of the public enums live here, beside the status strings: every build has them, with or
 * without the UCX protocols. */
GDTE_API const char *gdte_protocol_name(gdte_protocol_t p)
{
    switch (p) {
    case GDTE_PROTOCOL_AUTO: return "auto";
    case GDTE_PROTOCOL_EAGER: return "eager";
    case GDTE_PROTOCOL_COPYINOUT: return "copyinout";
    case GDTE_PROTOCOL_RDMA: return "rdma";
    }
    return "unknown";
}
