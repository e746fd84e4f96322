long c_outer(long n);
void start_c_thread(void);
