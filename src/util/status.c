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
