"""The face skewgroup.aggregators: the names users import from it are the implementation's own
objects (skewgroup._aggregation), and adapt hands off to the adapter. The adapter's behaviour is
tests/test_python_aggregator.py's."""
import pyarrow as pa

import skewgroup.aggregators as face
from _aggregators import Mean
from skewgroup._aggregation import python_aggregator, shipped


def test_every_exported_name_is_the_implementations_object():
    for name in face.__all__:
        if name == "adapt":
            continue
        home = python_aggregator if hasattr(python_aggregator, name) else shipped
        assert getattr(face, name) is getattr(home, name), name


def test_adapt_makes_the_adapter_with_what_it_was_given():
    buffer_type = pa.struct([("total", pa.float64()), ("n", pa.int64())])
    adapted = face.adapt(Mean(), "x", buffer_type=buffer_type, output_type=pa.float64(),
                         name="mean")
    assert isinstance(adapted, face.PythonAggregator)
    assert (adapted.name, adapted.columns, adapted.protocol) == ("mean", ("x",),
                                                                  "Spark Aggregator")
    assert adapted.buffer_type == buffer_type and adapted.output_type == pa.float64()
