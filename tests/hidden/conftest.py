"""The one fixture every hidden suite uses: ``impl``, the implementation under test.

It is the package reference, a notebook file (``--impl PATH``) or, inside a kernel during grading, the
learner's live namespace (see ``bytes2logits.kit.grading``). Tests reach the learner's names as
``impl.ByteTokenizer`` and write a docstring that says in words what is expected: that line is the
feedback a learner sees when the test fails.
"""

import pytest
from hypothesis import HealthCheck, settings

# Grades must not depend on luck: the same submission always meets the same examples.
settings.register_profile(
    "grading", derandomize=True, deadline=None, database=None, max_examples=150, print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.load_profile("grading")


@pytest.fixture
def impl(request):
    from bytes2logits.kit.grading import implementation_for

    return implementation_for(request.config, request.path.parent.name)
