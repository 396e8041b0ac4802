"""The course kit: lab registry, lab build, grading bridge, robust notebook execution, widgets, and the
capstone (``capstone``: SmolLM2 running on the learner's own labs 13–17).

Nothing here is course content; it is the machinery that turns the reference code in ``bytes2logits.lessons``
into lab notebooks and grades them the same way on a laptop, in CI and under nbgrader.
"""
