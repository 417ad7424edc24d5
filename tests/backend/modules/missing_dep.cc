// A library the broken test module links and that is deliberately left where
// the loader cannot find it (tests/backend/module_test.cc).
extern "C" int paratune_test_missing_dep() { return 42; }
