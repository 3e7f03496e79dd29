/* stresslib.c - the library stress.c dlopens (built as a shared object by the same tool). */
long lib_step(long x) {
  long r = 0;
  for (long i = 0; i <= x % 4; i++)
    r += (i & 1) ? i : -i;
  return r + x;
}
