# SPDX-License-Identifier: GPL-2.0
"""This node's /dev/pinmem as the plugin advertises it: REPLICAS devices
that all stand for the one device node, shared (as GPU time-slicing
replicas are): a container asks for one to be given the node.

- The module absent when the plugin starts: no devices (a node without
  the module offers none, and nothing is scheduled there for it).
- Present, or once it appears: every device Healthy.
- Gone after it was seen (the module unloaded): every device Unhealthy,
  so the kubelet stops admitting pods for it; Healthy again if it returns.

refresh() looks at the path it watches, the device node (a character
device) or the module's folder in sysfs (/sys/class/misc/pinmem, which a
container's /sys shows without any host mount), and wakes the watchers
when what it advertises changes; changes are numbered.
"""
import os
import stat
import threading

from .api import HEALTHY, UNHEALTHY


def is_there(path):
    """PATH is a character device or a folder (following links)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISDIR(mode)


class Node:
    def __init__(self, path, replicas):
        self.path = path
        self.ids = ["pinmem-%d" % i for i in range(replicas)]
        self.present = False
        self.seen = False
        self.generation = 0
        self.cond = threading.Condition()
        self.refresh()

    def refresh(self):
        """Look at the device node; True when what is advertised changed."""
        present = is_there(self.path)
        with self.cond:
            if present == self.present:
                return False
            self.present = present
            self.seen = self.seen or present
            self.generation += 1
            self.cond.notify_all()
            return True

    def snapshot(self):
        """(generation, [(id, health)]) as of now."""
        with self.cond:
            if not self.seen:
                return self.generation, []
            health = HEALTHY if self.present else UNHEALTHY
            return self.generation, [(i, health) for i in self.ids]

    def wait_change(self, generation, timeout):
        """Wait until the generation differs from GENERATION, a wake(),
        or TIMEOUT seconds."""
        with self.cond:
            if self.generation == generation:
                self.cond.wait(timeout)

    def wake(self):
        with self.cond:
            self.cond.notify_all()
