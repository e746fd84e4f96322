/* Links libctor_spin.so (ctor_spin.c): all its work is done before main. */
int ctor_spun(void);

int main(void) { return ctor_spun() ? 0 : 1; }
