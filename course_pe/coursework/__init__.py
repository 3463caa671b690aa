"""Coursework tools for *Positional Encoding, Corrected*: exercise checks, student notebooks, grading.

* :mod:`course_pe.coursework.exercises` - the registry of coding exercises and their checks (``cpe.exercises``)
* :mod:`course_pe.coursework.workbook` - student notebooks (``python -m course_pe.coursework.workbook``)
* :mod:`course_pe.coursework.grade` - the grader (``python -m course_pe.coursework.grade``, ``make grade``)
* :mod:`course_pe.coursework.sandbox` - the contained process that runs a submission, and the hostile channel to it
  (its child side is ``course_pe.coursework._child``, which never imports ``course_pe``)
* ``course_pe.coursework.grading_build`` - the copy of ``course_pe`` a submission imports, without the graded functions
* ``course_pe.coursework.roster`` and ``course_pe.coursework.names`` - whose submission is which; student names
* :mod:`course_pe.coursework.gradebook` - the SQLite gradebook and the LMS exports
* :mod:`course_pe.coursework.nbgrader_release` - an nbgrader course folder (``make nbgrader``)
* ``course_pe.coursework.nbgrader_autograde`` - nbgrader's autograde step, in the sandbox instead of a kernel

The positional encodings themselves live at the top of the package (:mod:`course_pe`).
"""
