/*
 * driver.c - minimal embedding of Lua 5.4 for tally's real-code tests.
 *
 * The lua-src crate ships only the Lua library (no lua.c), so this is the
 * stand-alone interpreter used to run testdata/lua/workload.lua:
 *
 *     ./lua-driver SCRIPT [ARGS...]
 *
 * It creates a state, opens the standard libraries, sets the global `arg`
 * like the reference interpreter does (arg[0] = SCRIPT, arg[1..] = ARGS,
 * arg[-1] = "lua" rather than the program path, so that differently named builds run the
 * exact same Lua code), runs SCRIPT with ARGS also passed as varargs,
 * reports an error (with a traceback) on stderr and exits 1 on error.
 * The state is closed on success and on error, so pending finalizers
 * (__gc) and to-be-closed variables run before exit.
 *
 * Valid as C and as C++: compile it together with the Lua sources with
 * clang (Lua errors use longjmp) or with clang++ -x c++ (Lua errors use
 * C++ exceptions). See README.md.
 */
#include <stdio.h>
#include <stdlib.h>

#include "lua.h"
#include "lualib.h"
#include "lauxlib.h"

#ifdef TALLY_PROBE
/* tally's events tests compile Lua with -include testdata/lua/probe.h, which makes lua_lock()
 * -- called on entry to every Lua C API function -- call tally_probe(): the exact event count
 * at each of those points is folded into a checksum printed at the end. */
#include <stdint.h>
uint64_t tally_events(void);
static uint64_t probe_sum = 1469598103934665603ull;
static unsigned long probe_count;
void tally_probe(void) {
  probe_sum = (probe_sum ^ tally_events()) * 1099511628211ull;
  probe_count++;
}
#endif

/* Message handler: append a traceback to string errors. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1; /* the error object's own string representation */
    msg = lua_pushfstring(L, "(error object is a %s value)",
                          luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int main(int argc, char **argv) {
  lua_State *L;
  int status, base, i;

  if (argc < 2) {
    fprintf(stderr, "usage: %s SCRIPT [ARGS...]\n", argv[0]);
    return 2;
  }
  L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "lua-driver: cannot create state: not enough memory\n");
    return 1;
  }
  luaL_openlibs(L);

  /* global 'arg' table, as in lua.c */
  lua_createtable(L, argc - 2 > 0 ? argc - 2 : 0, 2);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, i == 0 ? "lua" : argv[i]);
    lua_rawseti(L, -2, (lua_Integer)i - 1);
  }
  lua_setglobal(L, "arg");

  lua_pushcfunction(L, msghandler);
  base = lua_gettop(L);
  status = luaL_loadfile(L, argv[1]);
  if (status == LUA_OK) {
    luaL_checkstack(L, argc, "too many arguments to script");
    for (i = 2; i < argc; i++)
      lua_pushstring(L, argv[i]);
    status = lua_pcall(L, argc - 2, 0, base);
  }
  fflush(stdout);
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "lua-driver: %s\n", msg ? msg : "(non-string error)");
    fflush(stderr);
  }
  lua_close(L);
#ifdef TALLY_PROBE
  printf("probes %lu checksum %016llx\n", probe_count, (unsigned long long)probe_sum);
#endif
  return status == LUA_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}
