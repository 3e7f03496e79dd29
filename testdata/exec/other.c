/* other.c - another program, for the merge pattern's refusal of a different build. */
#include <stdio.h>

int main(void) {
  int s = 0;
  for (int i = 0; i < 10; i++)
    s += i;
  printf("%d\n", s);
  return 0;
}
