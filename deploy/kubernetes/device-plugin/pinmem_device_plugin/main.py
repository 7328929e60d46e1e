# SPDX-License-Identifier: GPL-2.0
"""pinmem-device-plugin: serve the DevicePlugin service on a socket in the
kubelet's device plugin folder, register it, and start over (a new socket,
a new registration) whenever the kubelet restarts; look at /dev/pinmem at
every tick and tell the kubelet when its devices change. SIGTERM or SIGINT
stop it: the socket is removed and it exits 0.
"""
import argparse
import logging
import os
import signal
import sys
import threading
from concurrent import futures

import grpc

from . import api, sockdir
from .kubelet import identity, register
from .node import Node
from .plugin import MAX_WATCHES, Plugin, options as plugin_options

log = logging.getLogger("pinmem-device-plugin")
UNARY_WORKERS = 6


def options(argv):
    ap = argparse.ArgumentParser(
        prog="pinmem-device-plugin",
        description="Kubernetes device plugin for /dev/pinmem (pinmem.ko)")
    ap.add_argument("--resource-name", default="pinmem.dev/memory")
    ap.add_argument("--replicas", type=int, default=16,
                    help="devices advertised, each a share of /dev/pinmem "
                    "(default 16): the most containers per node that use it")
    ap.add_argument("--device", default="/dev/pinmem",
                    help="the host's device node, handed to containers")
    ap.add_argument("--watch", help="what says the module is loaded, as this "
                    "process sees it: a device node or a folder (default "
                    "--device; in a pod /sys/class/misc/pinmem)")
    ap.add_argument("--plugin-dir", default="/var/lib/kubelet/device-plugins",
                    help="the kubelet's device plugin folder (kubelet.sock)")
    ap.add_argument("--endpoint", default="pinmem.sock",
                    help="this plugin's socket, in the plugin folder")
    ap.add_argument("--socket-dir", default="/run/pinmem",
                    help="the folder of pinmem-cached's socket cache.sock, "
                    "mounted read-only at the same path in containers: "
                    "pinmem's own, holding nothing else (sockdir.py)")
    ap.add_argument("--cdi", choices=("auto", "always", "never"),
                    default="auto", help="give containers the CDI device: "
                    "auto: when a CDI spec names its kind")
    ap.add_argument("--cdi-device", default="pinmem.dev/memory=all")
    ap.add_argument("--cdi-dirs", default="/etc/cdi:/var/run/cdi")
    ap.add_argument("--interval", type=float, default=1.0,
                    help="seconds between looks at the device and the "
                    "kubelet's socket (default 1)")
    cfg = ap.parse_args(argv)
    if not 1 <= cfg.replicas <= 1024:
        ap.error("--replicas must be 1 to 1024, not %d" % cfg.replicas)
    if cfg.interval <= 0 or "/" in cfg.endpoint:
        ap.error("--interval must be above 0, --endpoint a file name")
    if sockdir.problem(cfg.socket_dir):
        ap.error(sockdir.refusal(cfg.socket_dir))
    cfg.cdi_dirs = [d for d in cfg.cdi_dirs.split(":") if d]
    cfg.watch = cfg.watch or cfg.device
    return cfg


def start_server(cfg, node):
    sock = os.path.join(cfg.plugin_dir, cfg.endpoint)
    if os.path.lexists(sock):
        os.unlink(sock)
    # A ListAndWatch stream holds a worker while it lasts: the streams get
    # at most MAX_WATCHES (plugin.py), the unary calls six of their own.
    server = grpc.server(futures.ThreadPoolExecutor(
        max_workers=MAX_WATCHES + UNARY_WORKERS))
    server.add_generic_rpc_handlers(
        (api.handler(api.DEVICE_PLUGIN, Plugin(node, cfg)),))
    server.add_insecure_port("unix:" + sock)
    server.start()
    return server, sock


def try_register(cfg, said):
    """Register; a failure is logged once until its text changes (SAID:
    a one-item list holding the last text logged)."""
    try:
        register(cfg.plugin_dir, cfg.endpoint, cfg.resource_name,
                 plugin_options())
        said[0] = None
        return True
    except grpc.RpcError as e:
        why = e.details() if hasattr(e, "details") else str(e)
        if why != said[0]:
            log.warning("registering with the kubelet: %s; trying again "
                        "every %g s", why, cfg.interval)
            said[0] = why
        return False


def serve(cfg, node, stop):
    """Serve one socket until the kubelet restarts (True) or STOP (False)."""
    server, sock = start_server(cfg, node)
    own = identity(sock)
    kubelet_sock = os.path.join(cfg.plugin_dir, api.KUBELET_SOCKET)
    registered = None
    said = [None]
    try:
        while not stop.is_set():
            if node.refresh():
                log.info("%s %s", cfg.watch,
                         "present" if node.present else "absent")
            kubelet = identity(kubelet_sock)
            if identity(sock) != own or (registered and kubelet != registered):
                log.info("the kubelet restarted: serving and registering anew")
                return True
            if registered is None and kubelet is not None and \
                    try_register(cfg, said):
                registered = kubelet
                log.info("registered %s (%d devices) at %s", cfg.resource_name,
                         len(node.snapshot()[1]), sock)
            stop.wait(cfg.interval)
        return False
    finally:
        server.stop(grace=0.5).wait()
        if identity(sock) == own and own is not None:
            os.unlink(sock)


def main(argv=None):
    cfg = options(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="pinmem-device-plugin: %(message)s")
    if not os.path.isdir(cfg.plugin_dir):
        log.error("%s is not a folder: is the kubelet installed here?",
                  cfg.plugin_dir)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    node = Node(cfg.watch, cfg.replicas)
    log.info("%s: %s %s, %d devices when present", cfg.resource_name,
             cfg.watch, "present" if node.present else "absent",
             cfg.replicas)
    while serve(cfg, node, stop):
        pass
    return 0
