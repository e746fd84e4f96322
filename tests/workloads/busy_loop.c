/* Burns one CPU in user space until killed. */
int main(void)
{
	volatile unsigned long n = 0;
	for (;;)
		n++;
}
