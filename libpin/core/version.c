// SPDX-License-Identifier: MIT
/* The version of the running libpin, from the project's VERSION file. */
#include <pin.h>

const char *pin_version(void)
{
	return PIN_VERSION_STRING;
}
