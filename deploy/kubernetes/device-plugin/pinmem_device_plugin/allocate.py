# SPDX-License-Identifier: GPL-2.0
"""What a container allocated pinmem devices is given (Allocate):

- the device node, read-write ("rw": no mknod),
- the folder of pinmem-cached's socket, mounted read-only at the same path:
  connecting to a Unix socket needs write permission on the socket, which
  a read-only mount does not take away (EROFS is only for files, folders
  and links), while a pod can neither remove the service's socket nor put
  one of its own in its place for other pods to talk to; and so the folder
  must be pinmem's own (sockdir.py, checked at start), or pods could
  connect to whatever else is in it,
- PIN_CACHE_SOCKET naming the socket in it,
- the CDI device name (e.g. pinmem.dev/memory=all) for runtimes with CDI
  enabled, whose spec makes the same edits: "always", "never", or "auto":
  when a spec file in the CDI folders names the device's kind (a runtime
  with CDI enabled fails a container whose CDI device it cannot resolve).

The same for every container: the devices are shares of one node.
"""
import os

from . import api_pb2 as pb

CDI_SPEC_EXTS = (".json", ".yaml", ".yml")


def cdi_spec_present(dirs, kind):
    """Whether a CDI spec file in DIRS mentions KIND (vendor/class)."""
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            if not name.endswith(CDI_SPEC_EXTS):
                continue
            try:
                with open(os.path.join(d, name), encoding="utf-8",
                          errors="replace") as f:
                    if kind in f.read(1 << 20):
                        return True
            except OSError:
                continue
    return False


def cdi_names(cfg):
    if cfg.cdi == "never" or not cfg.cdi_device:
        return []
    kind = cfg.cdi_device.partition("=")[0]
    if cfg.cdi == "auto" and not cdi_spec_present(cfg.cdi_dirs, kind):
        return []
    return [cfg.cdi_device]


def container_response(cfg):
    """One ContainerAllocateResponse for CFG (main.py's options)."""
    sock_dir = cfg.socket_dir
    return pb.ContainerAllocateResponse(
        envs={"PIN_CACHE_SOCKET": os.path.join(sock_dir, "cache.sock")},
        mounts=[pb.Mount(container_path=sock_dir, host_path=sock_dir,
                         read_only=True)],
        devices=[pb.DeviceSpec(container_path="/dev/pinmem",
                               host_path=cfg.device, permissions="rw")],
        cdi_devices=[pb.CDIDevice(name=n) for n in cdi_names(cfg)])
