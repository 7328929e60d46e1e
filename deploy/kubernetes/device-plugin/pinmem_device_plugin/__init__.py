# SPDX-License-Identifier: GPL-2.0
"""pinmem's Kubernetes device plugin: advertises /dev/pinmem to the kubelet
as an extended resource (pinmem.dev/memory) of shareable devices, and hands
a container that is allocated one the device node, the cache service's
socket folder and its CDI device name. README: Documentation/kubernetes.md.
"""
