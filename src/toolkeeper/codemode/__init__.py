"""Code Mode: the model writes a program, and every call the program makes is a governed call."""
