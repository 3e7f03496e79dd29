/* What the `exec` case of rel.c executes: an uninstrumented program that does nothing, so any
 * profile found afterwards holds the counts of the image before exec. */
int main(void) { return 0; }
