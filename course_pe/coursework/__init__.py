"""Coursework tools for *Positional Encoding, Corrected*: exercise checks, student notebooks, grading.

* :mod:`course_pe.coursework.exercises` - the registry of coding exercises and their checks (``cpe.exercises``)
* :mod:`course_pe.coursework.workbook` - student notebooks (``python -m course_pe.coursework.workbook``)
* :mod:`course_pe.coursework.grade` - the grader (``python -m course_pe.coursework.grade``, ``make grade``)
* :mod:`course_pe.coursework.sandbox` - the isolated child process that runs a submission
* :mod:`course_pe.coursework.gradebook` - the SQLite gradebook and the LMS exports
* :mod:`course_pe.coursework.nbgrader_release` - an nbgrader course folder (``make nbgrader``)

The positional encodings themselves live at the top of the package (:mod:`course_pe`).
"""
