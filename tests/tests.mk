# SPDX-License-Identifier: GPL-2.0
# Each test area brings its own fragment: tests/<area>/<area>.mk.
include $(sort $(wildcard tests/*/*.mk))
