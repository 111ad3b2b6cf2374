import json
import operator
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain import requirements
from labq.domain.inventory import parse_inventory
from labq.domain.job import JobSpec
from labq.domain.model import System
from labq.domain.priority import Priority
from labq.errors import InputError
from labq.formats.beaker_xml import parse_beaker
from labq.formats.loader import detect_format, load_job

EXAMPLES = Path(__file__).parents[2] / "src" / "labq" / "examples"
DATA = Path(__file__).parents[1] / "data" / "beaker"


def job(body: str, *, rs: str = "", recipe: str = "") -> str:
    """A one-recipe job: <job> on line 1, <recipeSet> on 2, <recipe> on 3, body from 4."""
    return f"<job>\n<recipeSet{rs}>\n<recipe{recipe}>\n{body}\n</recipe>\n</recipeSet>\n</job>\n"


def host_of(body: str) -> requirements.Requirement:
    spec = parse_beaker(job(f"<hostRequires>{body}</hostRequires>"), source="job.xml")
    return spec.recipe_sets[0].recipes[0].host


def native_host(body: str) -> dict:
    return requirements.to_native(host_of(body))


# --- the bundled example -------------------------------------------------------


def test_bundled_example_reads_into_the_canonical_model():
    spec = load_job(EXAMPLES / "beaker.xml")
    assert spec.group == "kernel-qe"
    assert spec.whiteboard == "NFS connectathon, server and client"
    assert spec.metadata == {"retention_tag": "60days", "cc": ["fs-qe@example.com"]}
    (rs,) = spec.recipe_sets
    assert rs.priority is Priority.HIGH
    assert rs.max_retries == 2
    server, client = rs.recipes
    assert (server.role, client.role) == ("SERVERS", "CLIENTS")
    assert [t.name for t in server.tasks] == [
        "/distribution/check-install",
        "/kernel/filesystems/nfs/connectathon",
    ]
    assert all(t.run is None for t in server.tasks)
    assert server.tasks[0].role == "STANDALONE"
    assert server.tasks[1].params == {"NFS_VERSION": "4.2", "EXPORT": "/export/cthon"}
    assert server.metadata["kernel_options"] == "console=ttyS0,115200"
    assert server.metadata["watchdog"] == {"panic": "ignore"}
    assert server.metadata["reservesys"] == {"duration": 3600, "when": "onfail"}
    assert server.metadata["packages"] == ["nfs-utils"]
    assert server.metadata["autopick"] == {"random": False}
    assert server.metadata["distro_requires"] == {
        "and": [
            {"family": "RedHatEnterpriseLinux9"},
            {"variant": "BaseOS"},
            {"arch": "x86_64"},
        ]
    }


def test_bundled_example_host_requirements_pick_the_right_systems():
    server, client = load_job(EXAMPLES / "beaker.xml").recipe_sets[0].recipes
    good = System(
        fqdn="nfs1.lab1",
        lab="lab1",
        arch="x86_64",
        attributes={"memory_mb": 16384, "system_type": "Machine", "cpus": 8},
        pools=frozenset({"fs-team"}),
    )
    assert requirements.matches(server.host, good.facts())
    for wrong in (
        System(fqdn="nfs1.lab1", lab="lab1", arch="x86_64", attributes={"memory_mb": 16384}),
        System(
            fqdn="flaky3.lab1",
            lab="lab1",
            arch="x86_64",
            attributes={"memory_mb": 16384, "system_type": "Machine", "cpus": 8},
            pools=frozenset({"fs-team"}),
        ),
        System(
            fqdn="nfs2.lab1",
            lab="lab1",
            arch="aarch64",  # the distro is built for x86_64
            attributes={"memory_mb": 16384, "system_type": "Machine", "cpus": 8},
            pools=frozenset({"fs-team"}),
        ),
    ):
        assert not requirements.matches(server.host, wrong.facts())
    mira = System(fqdn="m1", lab="lab1", attributes={"machine_type": "mira", "memory_mb": 4096})
    vps = System(fqdn="v1", lab="lab1", attributes={"machine_type": "vps", "memory_mb": 4096})
    assert requirements.matches(client.host, mira.facts())
    assert not requirements.matches(client.host, vps.facts())


def test_canonical_form_round_trips():
    spec = load_job(EXAMPLES / "beaker.xml")
    assert JobSpec.model_validate(spec.canonical()) == spec
    assert JobSpec.model_validate(json.loads(json.dumps(spec.canonical()))) == spec


def test_xml_is_detected_as_beaker():
    assert detect_format((EXAMPLES / "beaker.xml").read_text()) == "beaker"


# --- recipe sets, recipes and tasks --------------------------------------------


@pytest.mark.parametrize("tag", ["recipeSet", "RecipeSet"])
@pytest.mark.parametrize(
    ("written", "level"),
    [
        ("Low", Priority.LOW),
        ("medium", Priority.MEDIUM),
        ("Normal", Priority.NORMAL),
        ("HIGH", Priority.HIGH),
        ("Urgent", Priority.URGENT),
    ],
)
def test_recipe_set_spellings_and_priorities(tag, written, level):
    text = f'<job><{tag} priority="{written}"><recipe/></{tag}></job>'
    (rs,) = parse_beaker(text, source="job.xml").recipe_sets
    assert rs.priority is level
    assert rs.max_retries == 0


def test_defaults_when_nothing_is_said():
    spec = parse_beaker("<job><recipeSet><recipe/></recipeSet></job>", source="job.xml")
    (rs,) = spec.recipe_sets
    assert rs.priority is Priority.NORMAL
    (recipe,) = rs.recipes
    assert recipe.host == requirements.ANY_SYSTEM
    assert (recipe.tasks, recipe.metadata, recipe.role) == ([], {}, None)
    assert (spec.metadata, spec.whiteboard, spec.group) == ({}, None, None)


def test_several_recipe_sets_keep_their_order_and_retries():
    text = (
        "<job>"
        '<recipeSet max_retries="3"><recipe role="A"/><recipe role="B"/></recipeSet>'
        '<RecipeSet priority="low"><recipe role="C"/></RecipeSet>'
        "</job>"
    )
    first, second = parse_beaker(text, source="job.xml").recipe_sets
    assert [r.role for r in first.recipes] == ["A", "B"]
    assert first.max_retries == 3
    assert [r.role for r in second.recipes] == ["C"]
    assert second.priority is Priority.LOW


def test_beaker_none_role_means_no_role():
    text = job('<task name="/a" role="None"/>', recipe=' role="None"')
    (recipe,) = parse_beaker(text, source="job.xml").recipe_sets[0].recipes
    assert recipe.role is None
    assert recipe.tasks[0].role is None


def test_kickstart_extras_are_kept_as_metadata():
    body = """<repos><repo name="extra" url="http://repo.example.com/x86_64/"/></repos>
<ks_appends><ks_append><![CDATA[%post
echo "<!DOCTYPE html>" > /root/index.html
%end]]></ks_append></ks_appends>
<partitions><partition fs="xfs" name="mnt/data" type="part" size="20"/></partitions>
<kickstart>install</kickstart>"""
    (recipe,) = (
        parse_beaker(job(body, recipe=' ks_meta="harness=restraint"'), source="j")
        .recipe_sets[0]
        .recipes
    )
    assert recipe.metadata == {
        "ks_meta": "harness=restraint",
        "repos": [{"name": "extra", "url": "http://repo.example.com/x86_64/"}],
        "ks_appends": ['%post\necho "<!DOCTYPE html>" > /root/index.html\n%end'],
        "partitions": [{"name": "mnt/data", "size": 20, "fs": "xfs", "type": "part"}],
        "kickstart": "install",
    }


def test_comments_and_processing_instructions_are_ignored():
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<!-- <!DOCTYPE is harmless inside a comment -->\n"
        "<job><?pi x?><recipeSet><!-- c --><recipe/></recipeSet></job>"
    )
    assert len(parse_beaker(text, source="job.xml").recipe_sets) == 1


# --- host requirements ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "native"),
    [
        ('<hostname value="a.example.com"/>', {"fqdn": "a.example.com"}),
        ('<labcontroller value="lab2"/>', {"lab": "lab2"}),
        ('<arch op="!=" value="s390x"/>', {"arch": {"!=": "s390x"}}),
        ('<memory op="&gt;=" value="4096"/>', {"memory_mb": {">=": 4096}}),
        ('<system_type value="Machine"/>', {"system_type": "Machine"}),
        ('<pool op="==" value="perf"/>', {"pool": "perf"}),
        ('<key_value key="DISKSPACE" op="&gt;" value="1.5"/>', {"DISKSPACE": {">": 1.5}}),
        ('<key_value key="NETBOOT" value="pxe"/>', {"NETBOOT": "pxe"}),
        ('<key_value key="DISK" op="like" value="10%"/>', {"DISK": {"like": "10%"}}),
        ('<system><name op="like" value="%.lab1"/></system>', {"fqdn": {"like": "%.lab1"}}),
        ('<system><memory op="&lt;" value="2048"/></system>', {"memory_mb": {"<": 2048}}),
        ('<system><type value="Virtual"/></system>', {"system_type": "Virtual"}),
        ('<system><model value="R640"/></system>', {"model": "R640"}),
        ('<system><vendor value="Dell"/></system>', {"vendor": "Dell"}),
        ('<system><lender value="qe"/></system>', {"lender": "qe"}),
        ('<system><numanodes op="&gt;" value="1"/></system>', {"numa_nodes": {">": 1}}),
        ('<system><hypervisor value=""/></system>', {"hypervisor": ""}),
        ('<hypervisor op="!=" value=""/>', {"hypervisor": {"!=": ""}}),
        # Beaker ignores a text leaf with no value (but not hypervisor: "" is "none")
        ('<arch value=""/><system><vendor value=""/></system>', {"and": []}),
        ('<system><last_inventoried value=""/></system>', {"last_inventoried": ""}),
        (
            '<system><last_inventoried op="&gt;=" value="2013-10-10"/></system>',
            {"last_inventoried": {">=": "2013-10-10"}},
        ),
        ('<device driver="e1000e"/>', {"device": {"driver": "e1000e"}}),
        ('<system><serial value="ABC1"/></system>', {"serial": "ABC1"}),
        ('<system><powertype value="ipmilan"/></system>', {"power_type": "ipmilan"}),
        ('<system><status value="Automated"/></system>', {"condition": "automated"}),
        ('<group value="perf"/>', {"pool": "perf"}),
        ('<system><added op="&lt;" value="2020-01-01"/></system>', {"added": {"<": "2020-01-01"}}),
        ('<system><added value=""/></system>', {"and": []}),  # Beaker: no date, no condition
        ('<system><user value="bob"/></system>', {"user": "bob"}),
        ('<system><loaned op="!=" value=""/></system>', {"loaned": {"!=": ""}}),
        ('<auto_prov value="true"/>', {"and": []}),  # every labq system is provisioned by its lab
        ('<group op="!=" value=""/>', {"pool": {"!=": ""}}),
        (
            '<device op="=" driver="e1000e" vendor_id="8086" type="NET"/>',
            {"device": {"and": [{"type": "NET"}, {"driver": "e1000e"}, {"vendor_id": "8086"}]}},
        ),
        ('<device op="like" driver="mlx%"/>', {"device": {"driver": {"like": "mlx%"}}}),
        ('<device op="!=" driver="igb"/>', {"not": {"device": {"driver": "igb"}}}),
        ('<device driver="" bus=""/>', {"and": []}),
        ("<disk/>", {"disk": {"and": []}}),
        (
            '<disk><size op="&gt;" value="128" units="GiB"/></disk>',
            {"disk": {"size": {">": 128 << 30}}},
        ),
        (
            '<disk><size value="2" units="TB"/><model op="like" value="WD%"/></disk>',
            {"disk": {"and": [{"size": 2 * 10**12}, {"model": {"like": "WD%"}}]}},
        ),
        ('<disk><sector_size value="4" units="KiB"/></disk>', {"disk": {"sector_size": 4096}}),
        ('<disk><phys_sector_size value="512"/></disk>', {"disk": {"phys_sector_size": 512}}),
        (
            '<disk><or><model value="a"/><not><size value="1" units="kB"/></not></or></disk>',
            {"disk": {"or": [{"model": "a"}, {"not": {"size": 1000}}]}},
        ),
        ('<disk_count op="&gt;=" value="2"/>', {"disk_count": {">=": 2}}),
        ('<disk_space op="&gt;" value="1" units="TiB"/>', {"disk_space": {">": 1 << 40}}),
        ('<cpu><processors op="&gt;=" value="8"/></cpu>', {"cpus": {">=": 8}}),
        ('<cpu><cores value="4"/></cpu>', {"cpu_cores": 4}),
        ('<cpu><sockets value="2"/></cpu>', {"cpu_sockets": 2}),
        ('<cpu><speed op="&gt;" value="2400.5"/></cpu>', {"cpu_speed": {">": 2400.5}}),
        ('<cpu><vendor value="GenuineIntel"/></cpu>', {"cpu_vendor": "GenuineIntel"}),
        ('<cpu><model value="85"/></cpu>', {"cpu_model": 85}),
        ('<cpu><family value="6"/></cpu>', {"cpu_family": 6}),
        ('<cpu><stepping value="4"/></cpu>', {"cpu_stepping": 4}),
        ('<cpu><hyper value="TRUE"/></cpu>', {"cpu_hyper": True}),
        ('<cpu><flag value="vmx"/></cpu>', {"cpu_flag": "vmx"}),
        (
            '<or><arch value="x86_64"/><arch value="aarch64"/></or>',
            {"or": [{"arch": "x86_64"}, {"arch": "aarch64"}]},
        ),
        (
            '<not><arch value="ppc64le"/><memory value="1"/></not>',
            {"not": {"and": [{"arch": "ppc64le"}, {"memory_mb": 1}]}},
        ),
        ("<and/><or/><not/><system/><cpu><and/></cpu>", {"and": []}),
        ('<or><and/><arch value="x86_64"/></or>', {"arch": "x86_64"}),
    ],
)
def test_host_requirement_elements_map_onto_properties(body, native):
    assert native_host(body) == native


def test_children_hold_together_and_nest():
    host = host_of(
        '<arch value="x86_64"/>'
        '<or><system><memory op="&gt;=" value="8192"/></system>'
        '<and><cpu><processors op="&gt;=" value="16"/></cpu><pool value="big"/></and></or>'
    )
    big_memory = System(fqdn="a", lab="l", attributes={"memory_mb": 8192, "cpus": 2})
    many_cpus = System(fqdn="b", lab="l", attributes={"cpus": 32}, pools=frozenset({"big"}))
    many_cpus_wrong_pool = System(fqdn="c", lab="l", attributes={"cpus": 32})
    wrong_arch = System(fqdn="d", lab="l", arch="ppc64le", attributes={"memory_mb": 8192})
    assert requirements.matches(host, big_memory.facts())
    assert requirements.matches(host, many_cpus.facts())
    assert not requirements.matches(host, many_cpus_wrong_pool.facts())
    assert not requirements.matches(host, wrong_arch.facts())


def test_force_names_one_system():
    text = job('<hostRequires force="box1.example.com"/>')
    (recipe,) = parse_beaker(text, source="job.xml").recipe_sets[0].recipes
    assert recipe.force == "box1.example.com"
    assert requirements.matches(recipe.host, System(fqdn="box1.example.com", lab="l").facts())
    assert not requirements.matches(recipe.host, System(fqdn="box2.example.com", lab="l").facts())


def test_force_is_not_narrowed_by_the_distro_arch():
    body = (
        '<distroRequires><distro_arch value="aarch64"/></distroRequires>'
        '<hostRequires force="box1"/>'
    )
    (recipe,) = parse_beaker(job(body), source="job.xml").recipe_sets[0].recipes
    assert requirements.to_native(recipe.host) == {"fqdn": "box1"}


def test_only_a_plain_distro_arch_narrows_the_host():
    body = (
        "<distroRequires><or>"
        '<distro_arch value="aarch64"/><distro_arch value="x86_64"/>'
        "</or></distroRequires>"
    )
    (recipe,) = parse_beaker(job(body), source="job.xml").recipe_sets[0].recipes
    assert recipe.host == requirements.ANY_SYSTEM
    assert recipe.metadata["distro_requires"] == {"or": [{"arch": "aarch64"}, {"arch": "x86_64"}]}


# --- bad input -----------------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<job><whiteboard>&lol3;</whiteboard><recipeSet><recipe/></recipeSet></job>
"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE job [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<job><whiteboard>&x;</whiteboard><recipeSet><recipe/></recipeSet></job>
"""
BARE_ENTITY = '<job>\n<whiteboard>\n<!ENTITY x "y">\n</whiteboard></job>'

BAD = [
    # (document, line, words in the message)
    ("<job>\n<recipeSet>\n<recipe>\n</recipeSet>\n</job>", 4, ["malformed XML", "mismatch"]),
    ("", 1, ["malformed XML", "empty"]),
    ("<job>&nope;</job>", 1, ["malformed XML", "nope"]),
    (BILLION_LAUGHS, 2, ["DOCTYPE", "refused", "XML bomb"]),
    (EXTERNAL_ENTITY, 2, ["DOCTYPE", "refused"]),
    (BARE_ENTITY, 3, ["ENTITY", "refused"]),
    ("<recipeSet/>", 1, ["must be a <job>"]),
    ("<job>\n<whiteboard>x</whiteboard>\n</job>", 1, ["<job> has no <recipeSet>"]),
    ("<job>\n<recipeSet priority='asap'>\n<recipe/></recipeSet></job>", 2, ["unknown priority"]),
    ("<job>\n<recipeSet>\n</recipeSet>\n</job>", 2, ["<recipeSet> has no <recipe>"]),
    ("<job>\n<RecipeSet priority='High'/>\n</job>", 2, ["<RecipeSet> has no <recipe>"]),
    ("<job>\n<recipeSet max_retries='two'><recipe/></recipeSet></job>", 2, ["max_retries"]),
    ("<job>\n<recipeSet max_retries='-1'><recipe/></recipeSet></job>", 2, ["max_retries"]),
    ("<job>\n<recipeSet bogus='1'><recipe/></recipeSet></job>", 2, ["unknown attribute bogus"]),
    ("<job colour='red'><recipeSet><recipe/></recipeSet></job>", 1, ["unknown attribute colour"]),
    ("<job>\n<jobsetup/>\n</job>", 2, ["unknown element <jobsetup> in <job>"]),
    ("<job>\n<whiteboard>a</whiteboard>\n<whiteboard>b</whiteboard>\n</job>", 3, ["only one"]),
    (job("<guestrecipe colour=''/>"), 4, ["unknown attribute colour on <guestrecipe>"]),
    (
        job("<guestrecipe>\n<guestrecipe/>\n</guestrecipe>"),
        5,
        ["unknown element <guestrecipe> in <guestrecipe>"],
    ),
    (job("<guestrecipe>\n<hostRequires force='a'/>\n</guestrecipe>"), 4, ["force= has no use"]),
    (job("<guestname/>"), 4, ["<guestname> is not supported yet"]),
    (job("\n<tasks/>"), 5, ["unknown element <tasks> in <recipe>"]),
    (job("", recipe=" colour='red'"), 3, ["unknown attribute colour on <recipe>"]),
    (job("stray words"), 3, ["unexpected text 'stray words' in <recipe>"]),
    (job("<task/>"), 4, ["<task> needs the attribute name"]),
    (job("<task name='/a'>\n<fetch url='ftp://x/y'/>\n</task>"), 5, ["scheme must be one of"]),
    (job("<task>\n<fetch url='git://x/y#../z'/>\n</task>"), 5, ["not a relative path"]),
    (job("<task>\n<fetch/>\n</task>"), 5, ["<fetch> needs the attribute url"]),
    (job("<task>\n<fetch url='git://x/y' ref='a'/>\n</task>"), 5, ["unknown attribute ref"]),
    (job("<task name='/a' timeout='5'/>"), 4, ["unknown attribute timeout on <task>"]),
    (
        job(
            "<task name='/a'><params>\n<param name='X' value='1'/>\n<param name='X' value='2'/>"
            "</params></task>"
        ),
        6,
        ["'X' is given twice"],
    ),
    (
        job("<task name='/a'><params>\n<param name='X'/></params></task>"),
        5,
        ["needs the attribute value"],
    ),
    (
        job("<hostRequires>\n<memory op='~' value='1'/>\n</hostRequires>"),
        5,
        ["unknown operator '~'"],
    ),
    (job("<hostRequires>\n<memory op='=&gt;' value='1'/></hostRequires>"), 5, ["unknown operator"]),
    (
        job(
            "<hostRequires>\n<and><or>\n<cpu><cores op='=~' value='2'/></cpu></or></and>"
            "</hostRequires>"
        ),
        6,
        ["unknown operator '=~' on <cores>"],
    ),
    (job("<hostRequires>\n<memory value='lots'/></hostRequires>"), 5, ["compares numbers", "lots"]),
    (job("<hostRequires>\n<arch op='&gt;' value='x'/></hostRequires>"), 5, ["only be compared"]),
    (job("<hostRequires>\n<cpu><hyper value='maybe'/></cpu></hostRequires>"), 5, ["true or false"]),
    (job("<hostRequires>\n<memory op='&gt;'/></hostRequires>"), 5, ["needs the attribute value"]),
    (job("<hostRequires>\n<key_value key='and' value='1'/></hostRequires>"), 5, ["key_value key"]),
    (
        job("<hostRequires>\n<disk><size value='1' units='gb'/></disk></hostRequires>"),
        5,
        ["unknown units 'gb' on <size>"],
    ),
    (
        job("<hostRequires>\n<disk><size value='1.5' units='TB'/></disk></hostRequires>"),
        5,
        ["<size> needs a whole number (of TB)"],
    ),
    (job("<hostRequires>\n<disk><size op='like' value='1'/></disk></hostRequires>"), 5, ["like"]),
    (job("<hostRequires>\n<disk><colour value='x'/></disk></hostRequires>"), 5, ["<colour>"]),
    (job("<hostRequires>\n<device op='=' /></hostRequires>"), 5, ["<device> needs one of"]),
    (job("<hostRequires>\n<device op='&gt;' driver='x'/></hostRequires>"), 5, ["<device> can"]),
    (job("<hostRequires>\n<device colour='red'/></hostRequires>"), 5, ["unknown attribute"]),
    (
        job(
            "<hostRequires>\n<system><last_inventoried value='10/10/2013'/></system></hostRequires>"
        ),
        5,
        ["needs a date YYYY-MM-DD (or nothing)"],
    ),
    (job("<hostRequires>\n<disk_count value='two'/></hostRequires>"), 5, ["compares numbers"]),
    (job("<hostRequires>\n<key_value key='device' value='1'/></hostRequires>"), 5, ["key_value"]),
    (
        job("<hostRequires>\n<system><added value='last week'/></system></hostRequires>"),
        5,
        ["<added> needs a date YYYY-MM-DD"],
    ),
    (job("<hostRequires>\n<auto_prov value='1'>x</auto_prov></hostRequires>"), 5, ["text"]),
    (
        job("<hostRequires>\n<cpu><name value='x'/></cpu></hostRequires>"),
        5,
        ["unknown element <name> in <cpu>"],
    ),
    (
        job("<hostRequires>\n<memroy value='1'/></hostRequires>"),
        5,
        ["unknown element <memroy> in <hostRequires>"],
    ),
    (
        job("<hostRequires force='box1'>\n<arch value='x86_64'/>\n</hostRequires>"),
        4,
        ["force", "cannot have other host requirements"],
    ),
    (job("<hostRequires force=' '/>"), 4, ["needs the attribute force"]),
    (job("<hostRequires/>\n<hostRequires/>"), 5, ["only one <hostRequires>"]),
    (job("<distroRequires>\n<distro_colour value='x'/></distroRequires>"), 5, ["unknown element"]),
    (job("<watchdog panic='always'/>"), 4, ["panic"]),
    (job("<reservesys when='sometimes'/>"), 4, ["when must be one of"]),
    (job("<reservesys duration='1h'/>"), 4, ["duration", "whole number"]),
    (job("<autopick random='perhaps'/>"), 4, ["random must be true or false"]),
    (job("<packages>\n<pkg name='x'/></packages>"), 5, ["unknown element <pkg> in <packages>"]),
    (job("<partitions><partition name='x'/></partitions>"), 4, ["needs the attribute size"]),
]


@pytest.mark.parametrize(("text", "line", "words"), BAD)
def test_bad_documents_name_file_line_and_problem(text, line, words):
    with pytest.raises(InputError) as caught:
        parse_beaker(text, source="job.xml")
    error = caught.value
    assert (error.source, error.line) == ("job.xml", line)
    message = str(error)
    assert message.startswith(f"job.xml:{line}: ")
    assert "\n" not in message
    for word in words:
        assert word in message


def test_places_are_xpaths():
    text = "<job><recipeSet><recipe/></recipeSet><recipeSet><recipe/>\n<recipe>\n<oops/>"
    text += "</recipe></recipeSet></job>"
    with pytest.raises(InputError) as caught:
        parse_beaker(text, source="job.xml")
    assert caught.value.place == "/job/recipeSet[2]/recipe[2]/oops"
    assert caught.value.line == 3


def test_validation_errors_point_into_the_xml():
    long_name = "/x" * 200
    text = job(f'<task name="/ok"/>\n<task name="{long_name}"/>')
    with pytest.raises(InputError) as caught:
        parse_beaker(text, source="job.xml")
    error = caught.value
    assert error.line == 5
    assert error.place == "/job/recipeSet/recipe/task[2]"
    assert "at most 255 characters" in error.problem


def test_errors_from_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text(job("<task name='/a'/>\n<guestrecipe guestname='g'>\n<fetch/></guestrecipe>"))
    with pytest.raises(InputError) as caught:
        load_job(bad)
    assert str(caught.value).startswith(f"{bad}:6: ")
    assert "unknown element <fetch> in <guestrecipe>" in str(caught.value)


def test_fetched_tasks_keep_their_url_and_get_a_name_when_they_have_none():
    spec = parse_beaker(
        job(
            "<task name='/kernel/nfs'><fetch url='git://h.example/tests.git?main#kernel/nfs'/>"
            "<params><param name='P' value='1'/></params></task>"
            "<task><fetch url='git://h.example/tasks#master' subdir='examples/4'/></task>"
            "<task><fetch url='https://h.example/a/v1.tar.gz#switch'/></task>"
        ),
        source="job.xml",
    )
    named, nameless, tarball = spec.recipe_sets[0].recipes[0].tasks
    assert (named.name, named.params) == ("/kernel/nfs", {"P": "1"})
    assert named.fetch is not None
    assert named.fetch.url == "git://h.example/tests.git?main#kernel/nfs"
    assert nameless.name == "/h.example/tasks/examples/4"
    assert nameless.fetch is not None
    assert nameless.fetch.subdir == "examples/4"
    assert tarball.name == "/h.example/a/v1.tar.gz/switch"


def test_a_guest_recipe_belongs_to_its_host_recipe():
    spec = load_job(DATA / "guestrecipe.xml")
    (host,) = spec.recipe_sets[0].recipes
    assert [t.name for t in host.tasks] == ["/distribution/check-install"]
    (guest,) = host.guests
    assert (guest.name, guest.args, guest.role) == ("vm1", "--ram=1024", "GUESTS")
    assert [t.name for t in guest.tasks] == ["/distribution/check-install"]
    # the guest's own requirements describe the guest: kept, never matched against the pool
    assert guest.metadata["host_requires"] == {"system_type": "Virtual"}


# --- hostRequires against an independent evaluation ------------------------------

# (element, property, values, numeric): built independently of labq's own table
TOP_LEAVES = [
    ("hostname", "fqdn", ["a.lab", "b.lab"], False),
    ("arch", "arch", ["x86_64", "aarch64"], False),
    ("memory", "memory_mb", [1024, 4096, 8192], True),
    ("cpu_count", "cpus", [1, 4, 16], True),
]
SYSTEM_LEAVES = [
    ("name", "fqdn", ["a.lab", "b.lab"], False),
    ("memory", "memory_mb", [1024, 4096, 8192], True),
    ("type", "system_type", ["Machine", "Virtual"], False),
]
CPU_LEAVES = [
    ("processors", "cpus", [1, 4, 16], True),
    ("vendor", "cpu_vendor", ["GenuineIntel", "AuthenticAMD"], False),
]
ORDER_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
EQUAL_OPS = {"=": operator.eq, "==": operator.eq, "!=": operator.ne}


@st.composite
def leaf(draw, table, key_value=False):
    tag, prop, values, numeric = draw(st.sampled_from(table))
    ops = {**EQUAL_OPS, **ORDER_OPS} if numeric else EQUAL_OPS
    op = draw(st.sampled_from(sorted(ops)))
    value = draw(st.sampled_from(values))
    if key_value:
        xml = f"<key_value key={quoteattr(prop)} op={quoteattr(op)} value={quoteattr(str(value))}/>"
    else:
        xml = f"<{tag} op={quoteattr(op)} value={quoteattr(str(value))}/>"

    def evaluate(facts):
        actual = facts.get(prop)
        if actual is None:
            return op == "!="
        return ops[op](actual, value)

    return xml, evaluate


def conjunction(parts):
    def evaluate(facts):
        said = [r for r in (p(facts) for p in parts) if r is not None]
        return all(said) if said else None

    return evaluate


def combined(children):
    @st.composite
    def build(draw):
        kind = draw(st.sampled_from(["and", "or", "not"]))
        kids = draw(st.lists(children, max_size=3))
        xml = f"<{kind}>{''.join(x for x, _ in kids)}</{kind}>"
        inner = conjunction([e for _, e in kids])

        def evaluate(facts):
            if kind == "or":
                said = [r for r in (e(facts) for _, e in kids) if r is not None]
                return any(said) if said else None
            result = inner(facts)
            return None if result is None or kind == "and" else not result

        return xml, evaluate if kind != "and" else inner

    return build()


def tree(leaves):
    return st.recursive(leaves, combined, max_leaves=6)


def container(tag, leaves):
    return st.lists(tree(leaves), max_size=3).map(
        lambda kids: (
            f"<{tag}>{''.join(x for x, _ in kids)}</{tag}>",
            conjunction([e for _, e in kids]),
        )
    )


HOST_TREE = tree(
    st.one_of(
        leaf(TOP_LEAVES),
        leaf([("", "machine_type", ["smithi", "mira"], False)], key_value=True),
        container("system", leaf(SYSTEM_LEAVES)),
        container("cpu", leaf(CPU_LEAVES)),
    )
)
FACTS = st.fixed_dictionaries(
    {"fqdn": st.sampled_from(["a.lab", "b.lab"]), "arch": st.sampled_from(["x86_64", "aarch64"])},
    optional={
        "memory_mb": st.sampled_from([1024, 2048, 4096, 8192]),
        "cpus": st.sampled_from([1, 4, 8, 16]),
        "system_type": st.sampled_from(["Machine", "Virtual"]),
        "cpu_vendor": st.sampled_from(["GenuineIntel", "AuthenticAMD"]),
        "machine_type": st.sampled_from(["smithi", "mira"]),
    },
)


@given(st.lists(HOST_TREE, max_size=3), FACTS)
def test_host_requirements_agree_with_an_independent_evaluation(parts, facts):
    host = host_of("".join(xml for xml, _ in parts))
    expected = conjunction([e for _, e in parts])(facts)
    assert requirements.matches(host, facts) is (True if expected is None else expected)


# --- <disk> and <device> against an independent evaluation --------------------------

UNIT_BYTES = {"bytes": 1, "kB": 1000, "KiB": 1024, "MB": 10**6, "GiB": 2**30, "TB": 10**12}
DISKS = st.lists(
    st.fixed_dictionaries(
        {"size": st.sampled_from([0, 999, 1000, 1024, 10**6, 2**30, 10**12, 2 * 10**12])},
        optional={"model": st.sampled_from(["WD", "Intel"])},
    ),
    max_size=3,
)
DISK_LEAVES = st.lists(
    st.tuples(
        st.sampled_from(sorted(ORDER_OPS | EQUAL_OPS)),
        st.sampled_from([1, 2, 1000]),
        st.sampled_from(sorted(UNIT_BYTES)),
    ),
    max_size=2,
)


@given(DISKS, DISK_LEAVES, st.sampled_from([None, "WD"]))
def test_a_disk_requirement_is_one_disk_meeting_all_of_it(disks, sizes, model):
    xml = "".join(f"<size op={quoteattr(op)} value='{v}' units='{u}'/>" for op, v, u in sizes) + (
        f"<model value='{model}'/>" if model else ""
    )
    host = host_of(f"<disk>{xml}</disk>")
    ops = {**ORDER_OPS, **EQUAL_OPS}

    def meets(disk):
        fits = all(ops[op](disk["size"], v * UNIT_BYTES[u]) for op, v, u in sizes)
        return fits and (model is None or disk.get("model") == model)

    system = System(fqdn="a", lab="l", inventory=parse_inventory({"disks": disks}))
    assert requirements.matches(host, system.facts()) is any(meets(d) for d in disks)


# --- custom distros, foreign namespaces, notify -------------------------------------

CUSTOM_DISTRO = """<distro>
<tree url="ftp://lab/distros/My1.0/Server/i386/os/"/>
<initrd url="pxeboot/initrd"/>
<kernel url="pxeboot/vmlinuz"/>
<arch value="i386"/>
<osversion major="RedHatEnterpriseLinux7" minor="4"/>
<name value="MyCustomLinux1.0"/>
</distro>"""


def test_a_custom_distro_is_provisioning_metadata_and_narrows_the_arch():
    spec = parse_beaker(job(CUSTOM_DISTRO + "<task name='/a'/>"), source="job.xml")
    recipe = spec.recipe_sets[0].recipes[0]
    assert recipe.metadata["distro"] == {
        "tree": "ftp://lab/distros/My1.0/Server/i386/os/",
        "initrd": "pxeboot/initrd",
        "kernel": "pxeboot/vmlinuz",
        "arch": "i386",
        "osversion": {"major": "RedHatEnterpriseLinux7", "minor": "4"},
        "name": "MyCustomLinux1.0",
    }
    assert requirements.to_native(recipe.host) == {"arch": "i386"}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("<distro><tree url='x'/></distro>", "<distro> needs <kernel>"),
        (CUSTOM_DISTRO.replace('<arch value="i386"/>', ""), "<distro> needs <arch>"),
        (CUSTOM_DISTRO.replace("<name", "<colour"), "unknown element <colour> in <distro>"),
        (CUSTOM_DISTRO.replace('url="pxeboot/initrd"', ""), "<initrd> needs the attribute url"),
        (CUSTOM_DISTRO + "<distroRequires/>", "<distroRequires> or a custom <distro>, not both"),
        ("<distroRequires/>" + CUSTOM_DISTRO, "<distroRequires> or a custom <distro>, not both"),
        (CUSTOM_DISTRO.replace("<name", "<arch value='x'/><name"), "only one <arch>"),
    ],
)
def test_bad_custom_distros_are_refused(body, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(")):
        parse_beaker(job(body), source="job.xml")


def test_foreign_namespace_elements_are_kept_never_refused():
    text = (
        "<job xmlns:b='http://example.com/bar'>\n<b:option>--foobar</b:option>"
        "<recipeSet><f:x xmlns:f='http://example.com/foo' a='1'/><recipe>"
        "<b:note>ok <b:deep/></b:note></recipe></recipeSet></job>"
    )
    spec = parse_beaker(text, source="job.xml")
    assert spec.metadata["extensions"] == [
        {
            "place": "/job/b:option",
            "xml": '<b:option xmlns:b="http://example.com/bar">--foobar</b:option>',
        },
        {  # each kept element carries the namespaces it may use: it reads on its own
            "place": "/job/recipeSet/f:x",
            "xml": '<f:x xmlns:f="http://example.com/foo" xmlns:b="http://example.com/bar" a="1"/>',
        },
        {
            "place": "/job/recipeSet/recipe/b:note",
            "xml": '<b:note xmlns:b="http://example.com/bar">ok <b:deep/></b:note>',
        },
    ]
    # an element of no namespace is still checked
    with pytest.raises(InputError, match="unknown element <option> in <job>"):
        parse_beaker("<job><option/><recipeSet><recipe/></recipeSet></job>", source="j.xml")


def test_notify_cc_duplicates_collapse_in_order():
    text = (
        "<job><notify><cc>b@x</cc><cc>a@x</cc><cc>b@x</cc></notify>"
        "<recipeSet><recipe/></recipeSet></job>"
    )
    assert parse_beaker(text, source="j.xml").metadata["cc"] == ["b@x", "a@x"]


def test_a_results_document_is_refused_as_such():
    with pytest.raises(InputError) as caught:
        parse_beaker("<job id='1' status='Running'><recipeSet/></job>", source="j.xml")
    assert "<job id=...> is a document Beaker wrote about a job it ran" in str(caught.value)
    assert "bkr job-clone" in str(caught.value)
