import sqlite3


def test_init_creates_the_default_sqlite_database_in_the_data_directory(labq, tmp_path):
    result = labq("init")
    assert result.returncode == 0, result.stderr
    db = tmp_path / "data" / "labq" / "labq.db"
    assert db.exists()
    assert "database ready" in result.stdout
    with sqlite3.connect(db) as conn:
        tables = {
            row[0] for row in conn.execute("select name from sqlite_master where type='table'")
        }
        assert {"systems", "jobs", "recipe_sets", "recipes", "tasks", "usage_history"} <= tables
        assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_init_twice_is_an_upgrade_not_an_error(labq, tmp_path):
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    first = labq("init", "--db", url)
    second = labq("init", "--db", url)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "(schema " in second.stdout
    assert (
        first.stdout.split("schema")[1].split(")")[0]
        == second.stdout.split("schema")[1].split(")")[0]
    )


def test_init_honours_labq_db(labq, tmp_path):
    target = tmp_path / "from-env.db"
    result = labq("init", env={"LABQ_DB": f"sqlite:///{target}"})
    assert result.returncode == 0, result.stderr
    assert target.exists()


def test_init_with_a_bad_url_is_a_plain_error(labq):
    result = labq("init", "--db", "nosuchdb://x")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("labq: ")


def test_init_creates_the_first_admin_once_and_shows_the_token_once(labq, tmp_path):
    url = f"sqlite:///{tmp_path / 'admin.db'}"
    first = labq("init", "--db", url, "--admin", "root")
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip().splitlines()[-1]
    assert token.startswith("lq_")
    second = labq("init", "--db", url)
    assert token not in second.stdout
    assert "created the first admin" not in second.stdout
    with sqlite3.connect(tmp_path / "admin.db") as conn:
        users = conn.execute("select name, admin from users").fetchall()
        digests = [row[0] for row in conn.execute("select digest from tokens")]
    assert users == [("root", 1)]
    assert token not in digests  # only a digest is stored
