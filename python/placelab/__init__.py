"""placelab: device placement of deep-learning graphs: graphs, clusters, a discrete-event simulator and
placers (placelab._core, native), plus notebook helpers: torch and ONNX import, plots and DataFrames."""

from ._core import *  # noqa: F401,F403 - the native API is the package's API
from ._core import Graph, Cluster, Simulator, Coarsening  # noqa: F401 - named for readers and linters
from . import _core
from . import _pickle  # noqa: F401 - registers pickling of Graph and Cluster
from .torch_import import from_torch, import_torch, UnsupportedOpWarning  # noqa: F401
from .onnx_import import from_onnx, import_onnx, UnsupportedOnnxOpWarning  # noqa: F401
from .tables import compare, results_frame, devices_frame  # noqa: F401
from . import tables, viz  # noqa: F401

__version__ = "0.1.0"
