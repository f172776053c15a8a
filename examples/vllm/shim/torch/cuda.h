#pragma once
#include <torch/all.h>
