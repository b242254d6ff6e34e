"""Scenes from Python: the same format, defaults and errors as the command line."""

import pytest

import eddies


def test_builtin_scene_loads_with_its_resolved_values():
    scene = eddies.Scene.load("dam-break-reint")
    assert (scene.name, scene.method, scene.dim) == ("dam-break-reint", "reint", 2)
    assert scene.resolution == [512, 512]
    assert scene.get("domain.size") == [1.0, 1.0]
    # A key the file leaves out comes back with its default.
    assert scene.get("time.cfl") == 0.8
    assert "[domain]" in scene.to_toml()


def test_a_misspelled_key_is_located_at_file_line_column_and_key():
    text = "method = \"reint\"\ndim = 2\n\n[domain]\nresoluton = [32, 32]\n"
    with pytest.raises(eddies.SceneError) as info:
        eddies.Scene.from_toml(text, name="typo")
    e = info.value
    assert (e.file, e.line, e.column) == ("<typo>", 5, 1)
    assert e.key == "domain.resoluton"
    assert "resoluton" in str(e) and "resolution" in str(e)
    # The CLI's caret line comes with the message.
    assert "^" in str(e)


def test_a_scene_file_error_names_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("method = \"reint\"\ndim = 2\n[time]\nfps = \"thirty\"\n")
    with pytest.raises(eddies.SceneError) as info:
        eddies.Scene.load(path)
    e = info.value
    assert (e.file, e.line, e.key) == (str(path), 4, "time.fps")


def test_an_unknown_scene_lists_the_builtins():
    with pytest.raises(eddies.SceneError) as info:
        eddies.Scene.load("no-such-scene")
    assert "no scene file or built-in scene named no-such-scene" in str(info.value)
    assert "dam-break-reint" in str(info.value)
    assert info.value.key is None and info.value.line is None


def test_set_checks_the_value_and_keeps_the_scene_on_refusal():
    scene = eddies.Scene.load("dam-break-reint")
    scene.set("reint.viscosity", 1e-3)
    assert scene.get("reint.viscosity") == 1e-3
    with pytest.raises(eddies.SceneError) as info:
        scene.set("reint.viscosity", -1.0)
    e = info.value
    assert e.key == "reint.viscosity"
    assert e.location == 'Scene.set("reint.viscosity", -1.0)'
    assert e.file is None
    assert scene.get("reint.viscosity") == 1e-3
    with pytest.raises(TypeError):
        scene.set("reint.viscosity", object())


def test_numpy_values_are_scene_values():
    np = pytest.importorskip("numpy")
    scene = eddies.Scene.load("dam-break-reint")
    scene.set("domain.resolution", np.array([96, 96]))
    scene.set("reint.viscosity", np.float32(0.5))
    assert scene.resolution == [96, 96]
    assert scene.get("reint.viscosity") == 0.5


def test_a_dict_is_the_scene_file_it_lays_out():
    text = eddies.Scene.load("dam-break-reint").to_toml()
    import tomllib

    as_dict = tomllib.loads(text)
    again = eddies.Scene.from_dict(as_dict, name="dam-break-reint")
    assert again.to_toml().split("\n", 3)[3] == text.split("\n", 3)[3]
    assert again.get("substance.0.rest_density") == as_dict["substance"][0]["rest_density"]


def test_scenes_lists_the_builtins_with_descriptions():
    rows = eddies.scenes()
    names = [r["name"] for r in rows]
    assert "paint-stream" in names and "dye-drop" in names
    assert all(r["description"] for r in rows)
