# SPDX-License-Identifier: GPL-2.0
"""The plugin's side of the kubelet: registering, and telling that the
kubelet restarted. A restarting kubelet removes every socket in its device
plugin folder and makes kubelet.sock anew, and forgets its plugins; a
plugin learns of it only by looking: its own socket gone, or kubelet.sock
another file than the one it registered with.
"""
import os

from . import api
from . import api_pb2 as pb


def identity(path):
    """(device, inode) of PATH, or None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def register(plugin_dir, endpoint, resource, options, timeout=5.0):
    """Register with the kubelet at PLUGIN_DIR/kubelet.sock; raises
    grpc.RpcError when it refuses or does not answer."""
    with api.unix_channel(os.path.join(plugin_dir, api.KUBELET_SOCKET)) as ch:
        api.Stub(ch, api.REGISTRATION).Register(pb.RegisterRequest(
            version=api.VERSION, endpoint=endpoint, resource_name=resource,
            options=options), timeout=timeout)
