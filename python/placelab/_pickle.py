"""Pickling and copying of the immutable native objects that have a document form (Graph, Cluster).

pickle stores the document (to_dict()) and rebuilds the object from it, so graphs and clusters can be
sent to worker processes (multiprocessing, concurrent.futures, joblib); the rebuilt object has the
same document. copy.copy and copy.deepcopy return the object itself, as for tuples: nothing can change it.
"""

import copyreg

from . import _core


def _graph(doc):
    return _core.graph_from_dict(doc, "pickled graph")


def _cluster(doc):
    return _core.cluster_from_dict(doc, "pickled cluster")


def _itself(obj, memo=None):
    return obj


for _cls, _rebuild in ((_core.Graph, _graph), (_core.Cluster, _cluster)):
    copyreg.pickle(_cls, lambda obj, rebuild=_rebuild: (rebuild, (obj.to_dict(),)))
    _cls.__copy__ = _itself
    _cls.__deepcopy__ = _itself
