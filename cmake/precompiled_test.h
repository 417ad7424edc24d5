// GoogleTest, precompiled once for the test programs (cmake/Precompiled.cmake).
#include <gtest/gtest.h>
