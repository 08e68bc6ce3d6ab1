"""Developer tools run by the Makefile and the tests; never deployed."""
