/*
 * Force-included (-include) into every Lua translation unit by tally's exactness tests.
 *
 * Lua hashes some keys by address: the luaS_new string cache hashes the address of C string
 * literals, and tables hash light userdata, C functions and collectable keys by pointer.
 * Differently instrumented builds place code, data and heap at different addresses, so the
 * same workload would take different hash-collision paths in each build and their block counts
 * could not be compared. Mapping every pointer hash to 0 keeps Lua's semantics (the cache and the
 * tables still compare keys exactly; only slot choice changes) while making its control flow
 * independent of addresses. The sort pivot randomization (clock/time) is disabled likewise.
 */
#include "lprefix.h"
#define LUA_LIB /* so that luaconf.h defines the internal macros llimits.h needs */
#include "llimits.h"
#undef LUA_LIB
#undef point2uint
#define point2uint(p) ((unsigned int)((void)(p), 0u))
#define l_randomizePivot() 0u
