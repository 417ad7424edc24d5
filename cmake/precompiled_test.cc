// The source of the target that builds the test programs' precompiled header
// (paratune_add_test_pch in cmake/Precompiled.cmake): the header is its content.
