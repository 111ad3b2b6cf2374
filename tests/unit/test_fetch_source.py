"""Fetch URLs taken apart: restraint's ``?ref#subdir``, Beaker's ``#ref`` with ``subdir=``."""

import pytest

from labq.domain.fetch import SourceError, parse_source, task_name


@pytest.mark.parametrize(
    ("url", "subdir", "readings"),
    [
        # restraint: the query is the ref, the fragment the subdirectory
        ("git://h/tests.git?master#kernel/nfs", None, [("master", "kernel/nfs")]),
        # Beaker: the fragment is the ref when subdir= names the subdirectory
        ("git://h/tasks#master", "examples/3", [("master", "examples/3")]),
        ("git://h/tasks?v1", "examples/3", [("v1", "examples/3")]),
        # a bare #word: a branch if the repository has one, else a subdirectory
        ("git://h/tasks/example#master", None, [("master", None), (None, "master")]),
        ("https://h/tasks.git", None, [(None, None)]),
        ("file:///srv/tasks#a/b", None, [("a/b", None), (None, "a/b")]),
        # a tarball: no ref; the fragment (or subdir=) is the subdirectory
        ("https://h/a/v1.tar.gz#switch", None, [(None, "switch")]),
        ("https://h/a/v1.tgz", "switch", [(None, "switch")]),
    ],
)
def test_a_url_reads_as_restraint_and_beaker_write_it(url, subdir, readings):
    assert parse_source(url, subdir).readings() == readings


@pytest.mark.parametrize(
    ("url", "subdir", "problem"),
    [
        ("ftp://h/x", None, "scheme must be one of"),
        ("git:///x", None, "names no host"),
        ("git://h/", None, "names no repository"),
        ("git://h/x#../y", None, "not a relative path"),
        ("git://h/x#/etc", None, "not a relative path"),
        ("git://h/x", "a/../../b", "not a relative path"),
        ("git://h/x?--upload-pack=evil", None, "is not a git ref"),
        ("https://h/a.tar.gz?v1", None, "is not a git ref"),
        ("https://h/a.tar.gz#a", "b", "a subdirectory and a subdir attribute"),
        ("git://h/x?a#b", "c", "with a subdir too"),
        (" git://h/x", None, "surrounding blanks"),
    ],
)
def test_urls_labq_cannot_use_are_refused_saying_why(url, subdir, problem):
    with pytest.raises(SourceError, match=problem):
        parse_source(url, subdir)


def test_a_nameless_task_is_named_as_restraint_names_its_directory():
    assert task_name("git://h/tests.git?master#kernel/nfs") == "/h/tests.git/kernel/nfs"
    assert task_name("git://h/tasks#master", "examples/4") == "/h/tasks/examples/4"
    assert task_name("git://h/tasks/example2#master") == "/h/tasks/example2"
    assert task_name("https://h/a/v1.tar.gz#switch") == "/h/a/v1.tar.gz/switch"
