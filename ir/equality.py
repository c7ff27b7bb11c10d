"""Placeholder: being written (structural equality)."""


def structurally_equal(a, b):
    raise NotImplementedError("structural equality under construction")
