# SPDX-License-Identifier: GPL-2.0
"""The device plugin API (v1beta1) on the wire: its two services, the
methods of each with their message classes (api_pb2, made by protoc from
api.proto at build time), a server-side handler and a client stub for
either service. grpc's generic handlers stand in for generated service
code: Debian 12's python3-grpc-tools (1.14) is older than its grpcio
(1.51), and the tables below are all that code would hold.
"""
import grpc

from . import api_pb2 as pb

VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

# (service, {method: (request class, response class, server streams)})
REGISTRATION = ("v1beta1.Registration", {
    "Register": (pb.RegisterRequest, pb.Empty, False),
})
DEVICE_PLUGIN = ("v1beta1.DevicePlugin", {
    "GetDevicePluginOptions": (pb.Empty, pb.DevicePluginOptions, False),
    "ListAndWatch": (pb.Empty, pb.ListAndWatchResponse, True),
    "GetPreferredAllocation": (pb.PreferredAllocationRequest,
                               pb.PreferredAllocationResponse, False),
    "Allocate": (pb.AllocateRequest, pb.AllocateResponse, False),
    "PreStartContainer": (pb.PreStartContainerRequest,
                          pb.PreStartContainerResponse, False),
})


def handler(service, impl):
    """A grpc handler serving the methods of SERVICE that IMPL defines (by
    name, as impl.Method(request, context)); the others are UNIMPLEMENTED."""
    name, methods = service
    table = {}
    for method, (req, resp, streams) in methods.items():
        fn = getattr(impl, method, None)
        if fn is None:
            continue
        make = (grpc.unary_stream_rpc_method_handler if streams
                else grpc.unary_unary_rpc_method_handler)
        table[method] = make(fn, request_deserializer=req.FromString,
                             response_serializer=resp.SerializeToString)
    return grpc.method_handlers_generic_handler(name, table)


class Stub:
    """The client side of SERVICE over CHANNEL: stub.Method(request,
    timeout=S) returns the response, or an iterator for a stream."""

    def __init__(self, channel, service):
        name, methods = service
        for method, (req, resp, streams) in methods.items():
            make = channel.unary_stream if streams else channel.unary_unary
            setattr(self, method, make(
                "/%s/%s" % (name, method),
                request_serializer=req.SerializeToString,
                response_deserializer=resp.FromString))


def unix_channel(path):
    """A channel to the gRPC server listening on the Unix socket PATH."""
    return grpc.insecure_channel("unix:" + path)
