/* main.c — placeholder until the CLI lands (replaced in this same issue). */
int main(void) { return 0; }
