# SPDX-License-Identifier: GPL-2.0
"""The DevicePlugin service, as the kubelet calls it on the plugin's socket:

- GetDevicePluginOptions: PreStartContainer wanted, no preferred allocation
  (the devices are interchangeable shares of one node);
- ListAndWatch: the devices (node.py) now, then at every change, until the
  kubelet hangs up or the server stops; at most MAX_WATCHES at a time, more
  refused with RESOURCE_EXHAUSTED, as each holds one of the server's
  workers for as long as it lasts (the kubelet keeps one; a second covers
  a stream it opens anew before the old one is seen gone), so that streams
  cannot take the workers Allocate and PreStartContainer need (main.py);
- Allocate: per container (allocate.py), after checking that every id asked
  for is one of ours (INVALID_ARGUMENT) and that the device node is there
  (FAILED_PRECONDITION);
- PreStartContainer: the device node still there, else FAILED_PRECONDITION,
  so a container allocated just before the module left does not start
  without it.
"""
import logging
import threading

import grpc

from . import api_pb2 as pb
from .allocate import container_response

log = logging.getLogger("pinmem-device-plugin")


MAX_WATCHES = 2


def options():
    return pb.DevicePluginOptions(pre_start_required=True,
                                  get_preferred_allocation_available=False)


class Plugin:
    def __init__(self, node, cfg):
        self.node = node
        self.cfg = cfg
        self.watches = threading.BoundedSemaphore(MAX_WATCHES)

    def GetDevicePluginOptions(self, request, context):
        return options()

    def ListAndWatch(self, request, context):
        if not self.watches.acquire(blocking=False):
            log.warning("ListAndWatch refused: %d streams open already",
                        MAX_WATCHES)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "%d ListAndWatch streams are open already, the "
                          "most this plugin serves" % MAX_WATCHES)
        try:
            yield from self._watch(context)
        finally:
            self.watches.release()

    def _watch(self, context):
        context.add_callback(self.node.wake)
        sent = None
        while context.is_active():
            generation, devices = self.node.snapshot()
            if generation != sent:
                sent = generation
                log.info("ListAndWatch: %d devices, %s", len(devices),
                         devices[0][1] if devices else "none")
                yield pb.ListAndWatchResponse(devices=[
                    pb.Device(ID=i, health=h) for i, h in devices])
            self.node.wait_change(sent, 1.0)

    def _check(self, ids, context):
        unknown = sorted(set(ids) - set(self.node.ids))
        if unknown:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "unknown device ids: %s" % ", ".join(unknown))
        self.node.refresh()
        if not self.node.present:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "the pinmem module is not loaded on this node "
                          "(%s is absent)" % self.node.path)

    def Allocate(self, request, context):
        out = pb.AllocateResponse()
        for req in request.container_requests:
            self._check(req.devices_ids, context)
            out.container_responses.append(container_response(self.cfg))
        log.info("Allocate: %d containers", len(out.container_responses))
        return out

    def PreStartContainer(self, request, context):
        self._check(request.devices_ids, context)
        return pb.PreStartContainerResponse()
