/*
 * Force-included (-include) into every Lua translation unit by tally's events tests: lua_lock()
 * runs on entry to every Lua C API function, so each becomes a point where the exact event
 * count is asked (tally_probe() in driver.c, built with -DTALLY_PROBE).
 */
void tally_probe(void);
#define lua_lock(L) tally_probe()
