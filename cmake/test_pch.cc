// The program that builds the tests' precompiled header (tandem_test_pch,
// cmake/TandemHelpers.cmake); an executable so that its flags are the
// tests' own. It does nothing.
int main() { return 0; }
