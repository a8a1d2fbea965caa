"""The project's launch facts: which options the command lines in its scripts, READMEs and configs
give each script (steplint.project.launches)."""

from steplint.effects import ANY_OPTION
from steplint.project.launches import MAX_LAUNCH_BYTES, Launches, add_launch_text, keys_set_true, read_launches


def launches(*texts: str) -> Launches:
    found = Launches()
    for text in texts:
        add_launch_text(found, text)
    return found


def test_a_line_gives_the_script_it_names_its_options():
    found = launches("python train.py --amp --epochs 90\npython eval.py --fp16\n")
    assert found.options_for("train.py") == ["amp", "epochs"]
    assert found.options_for("eval.py") == ["fp16"]


def test_dashes_in_an_option_are_read_as_its_destination():
    assert launches("python train.py --mixed-precision\n").options_for("train.py") == ["mixed_precision"]


def test_continued_lines_are_one_command():
    text = "torchrun --nproc_per_node=8 tools/train.py \\\n    --lr 3e-3 \\\n    --amp\n"
    assert launches(text).options_for("tools/train.py") == ["amp", "lr", "nproc_per_node"]


def test_folders_written_on_the_line_must_end_the_module_path():
    found = launches("python ../drivers/run_ann.py --fp16\n")
    assert found.options_for("drivers/run_ann.py") == ["fp16"]
    # another run_ann.py is not that script: it gets what the launch files mention anywhere
    assert "fp16" in found.options_for("legacy/run_ann.py")
    assert launches("python ../drivers/run_ann.py --fp16\npython legacy/run_ann.py\n").options_for("legacy/run_ann.py") == []


def test_a_module_run_with_dash_m_is_its_file():
    assert launches("python -m pkg.train --amp\n").options_for("src/pkg/train.py") == ["amp"]


def test_a_script_no_line_names_may_get_any_option_mentioned():
    found = launches("Add `--fp16` to train in mixed precision.\n", "python other.py --lr 1\n")
    assert found.options_for("train.py") == ["fp16", "lr"]  # (the project's scripts not known: other.py may be any)


def test_a_script_no_line_names_is_not_given_another_scripts_options():
    found = launches("Add `--fp16` to train in mixed precision.\n", "python other.py --lr 1 --amp\n", "python gone.py --accum 4\n")
    found.modules = {"train.py", "tools/other.py"}
    # other.py's line is its own; gone.py is no script of the project (renamed since): any may be run so
    assert found.options_for("train.py") == ["accum", "fp16"]
    assert found.options_for("tools/other.py") == ["amp", "lr"]


def test_variables_assigned_in_the_script_are_expanded():
    text = 'EXTRA="--amp --epochs 3"\ntorchrun train.py --lr 1 $EXTRA\n'
    assert launches(text).options_for("train.py") == ["amp", "epochs", "lr"]


def test_a_variable_where_options_go_may_give_any_option():
    assert ANY_OPTION in launches('python train.py --lr 1 "$@"\n').options_for("train.py")
    assert ANY_OPTION in launches("python train.py $EXTRA_ARGS\n").options_for("train.py")


def test_a_variable_as_an_options_value_gives_no_option():
    text = "python train.py --model_type $model_type --nproc=$gpus --out ${dir}/run\n"
    assert launches(text).options_for("train.py") == ["model_type", "nproc", "out"]


def test_config_files_tell_the_keys_they_set_true(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "unet.yaml").write_text("epochs: 300\namp: true\ndeterministic: false\n")
    (tmp_path / "ds.json").write_text('{\n  "fp16": true,\n  "bf16": false\n}\n')
    found = read_launches(str(tmp_path))
    assert found.configs.configured == {"amp", "fp16"}


def test_python_config_modules_tell_the_keys_they_set(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "quality_config.py").write_text(
        'SEED = 7\nquality_config = {"fp16": False, "optim": {"amp": True}, "lr": 2e-5}\n'
    )
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "kaggle.py").write_text("class CFG:\n    apex = False\n    scheduler = 'cosine'\n")
    (tmp_path / "model.py").write_text('defaults = {"bf16": False}\n')  # no config module: code, not settings
    (tmp_path / "broken_config.py").write_text("settings = {\n")
    found = read_launches(str(tmp_path))
    assert found.configs.config_false == {"quality_config.fp16", "CFG.apex"}
    assert found.configs.configured == {"amp"}


def test_a_settings_field_default_is_declared_not_set(tmp_path):
    found = Launches()
    found.note_code("@dataclass\nclass Args:\n    fp16: bool = True\n\ncfg.amp = True\n")
    assert "fp16" in found.declared_true and "fp16" not in found.set_in_code
    assert "amp" in found.set_in_code


def test_launch_files_are_read_from_the_project_tree(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "pretrain.sh").write_text("python train.py --amp\n")
    (tmp_path / "Makefile").write_text("train:\n\tpython eval.py --fp16\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "run.sh").write_text("python train.py --compile\n")  # a default-excluded folder
    (tmp_path / "big.md").write_text("python train.py --huge\n" + "x" * MAX_LAUNCH_BYTES)
    found = read_launches(str(tmp_path))
    assert found.options_for("train.py") == ["amp"]
    assert found.options_for("eval.py") == ["fp16"]


def test_scripts_are_read_before_data_files_use_up_the_budget(tmp_path, monkeypatch):
    import steplint.project.launches as launches_module

    monkeypatch.setattr(launches_module, "MAX_LAUNCH_TOTAL_BYTES", 1000)
    (tmp_path / "annotations.json").write_text(('{"images": "' + "x" * 1000)[:988] + '"}')  # 990 bytes of the 1000
    (tmp_path / "zz_train.sh").write_text("python train.py --amp\n")
    found = read_launches(str(tmp_path))
    assert found.options_for("train.py") == ["amp"]


def test_a_sliced_argument_list_may_give_any_option():
    text = 'python -m torch.distributed.launch --nproc_per_node=$GPUS $(dirname "$0")/train.py --config $CONFIG ${@:3}\n'
    assert ANY_OPTION in launches(text).options_for("tools/train.py")


def test_a_wrapper_script_gives_what_the_lines_that_run_it_give(tmp_path):
    (tmp_path / "dist_pretrain.sh").write_text("CFG=$1\nGPUS=$2\nPY_ARGS=${@:3}\npython -m torch.distributed.launch --nproc_per_node=$GPUS main_mfm.py --cfg ${CFG} ${PY_ARGS}\n")
    (tmp_path / "PRETRAIN.md").write_text("bash dist_pretrain.sh configs/vit.yaml 16 --data-path /data --batch-size 128 [--output <dir>]\n")
    assert read_launches(str(tmp_path)).options_for("main_mfm.py") == ["batch_size", "cfg", "data_path", "nproc_per_node", "output"]
    # run by nothing, or by a line that passes its own arguments on: any option, as before
    (tmp_path / "PRETRAIN.md").write_text("Pretraining: see dist_pretrain.sh.\n")
    (tmp_path / "run_all.sh").write_text('bash dist_pretrain.sh configs/vit.yaml 16 "$@"\n')
    assert ANY_OPTION in read_launches(str(tmp_path)).options_for("main_mfm.py")
    (tmp_path / "run_all.sh").unlink()
    assert ANY_OPTION in read_launches(str(tmp_path)).options_for("main_mfm.py")


def test_a_wrapper_that_names_no_script_may_give_any_script_any_option():
    found = launches('torchrun --nproc_per_node=8 "$@"\n', "python eval.py --fp16\n")
    assert ANY_OPTION in found.options_for("train.py")
    assert found.options_for("eval.py") == ["fp16"]


def test_code_sets_a_key_true_as_an_annotated_default_a_dict_entry_or_an_option_on_by_default():
    code = (
        "@dataclass\nclass Config:\n    use_amp: bool = True\n    fp16_run: Optional[bool] = True\n    bf16: bool = False\n"
        "deepspeed_config = {\"fp16\": True, 'half': False}\n"
        "parser.add_argument(\"--mixed-precision\", action=\"store_true\", default=True, help=\"on unless told\")\n"
        "parser.add_argument('--autocast', action='store_false')\n"
        "parser.add_argument('--apex', action='store_true')\n"
        "if cfg.amp == True:\n    pass\n"
    )
    found = keys_set_true(code)
    assert {"use_amp", "fp16_run", "fp16", "mixed_precision", "autocast"} <= found
    assert not {"bf16", "half", "apex", "amp"} & found


def test_launch_lines_give_option_values(tmp_path):
    from steplint.project.launches import read_launches

    (tmp_path / "run.sh").write_text(
        "ACC=2\npython train.py --accum 1 --fp16 --lr=$LR \\\n  --name bert-base\npython train.py --accum=$ACC --epochs 3\n"
    )
    lines = read_launches(str(tmp_path)).option_values_for("train.py")
    assert lines == [{"accum": "1", "fp16": "", "lr": None, "name": "bert-base"}, {"accum": "2", "epochs": "3"}]
    assert read_launches(str(tmp_path)).option_values_for("eval.py") is None


def test_a_usage_line_gives_its_bracketed_options(tmp_path):
    from steplint.project.launches import read_launches

    (tmp_path / "README.md").write_text(
        "```\npython tools/train.py --hypes_yaml ${CONFIG_FILE} [--model_dir  ${CHECKPOINT_FOLDER} --half]\n```\n"
    )
    lines = read_launches(str(tmp_path)).option_values_for("tools/train.py")
    assert lines == [{"hypes_yaml": None, "model_dir": None, "half": ""}]


def test_an_option_every_launch_gives_one_value_has_that_value(tmp_path):
    import libcst as cst

    from steplint.config import Settings
    from steplint.model import build_model
    from steplint.project.context import ModuleContext
    from steplint.source import Source

    text = 'import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument("--accum", type=int, default=1)\nargs = parser.parse_args()\n'
    module = cst.parse_module(text)
    for lines, value in (([{"accum": "1"}, {"accum": "1", "lr": "3"}], 1), ([{"accum": "1"}, {"lr": "3"}], 1),
                         ([{"accum": "4"}, {"lr": "3"}], ...), ([{"accum": None}], ...), (None, ...)):
        given = sorted({name for line in lines or [{"accum": "4"}] for name in line})
        context = ModuleContext("train.py", launch_options=given, launch_values=lines)
        model = build_model(Source("train.py", text), module, Settings(), context)
        assert model.roles.command_line.value_as_run(cst.parse_expression("args.accum"), model.structure.scopes[0])[0] == value, lines


def test_a_line_naming_a_project_script_claims_its_options_for_it(tmp_path):
    (tmp_path / "models").mkdir()
    for name in ("models/run_dual_encoder.py", "models/run_cross_encoder.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "run.sh").write_text("python -m torch.distributed.launch --nproc_per_node 8 ./models/run_dual_encoder.py --fp16\n")
    found = read_launches(str(tmp_path))
    assert found.modules == {"models/run_dual_encoder.py", "models/run_cross_encoder.py"}
    assert found.options_for("models/run_dual_encoder.py") == ["fp16", "nproc_per_node"]
    # (the launcher module is no script of the project, but the line names one: its options are that script's)
    assert found.options_for("models/run_cross_encoder.py") == []


def test_an_options_variable_is_launched_where_it_is_expanded():
    text = 'gpt_options=" \\\n  --save model \\\n  --model-parallel-size ${MP_SIZE} \\\n  --fp16 \\\n"\nrun_cmd="mpirun --np ${GPUS} python ../pretrain_gpt.py ${gpt_options}"\neval "${run_cmd}"\n'
    found = launches(text)
    found.modules = {"pretrain_gpt.py", "pretrain_other.py"}
    assert found.options_for("pretrain_gpt.py") == ["fp16", "model_parallel_size", "np", "save"]
    # (the definition itself launches nothing: its options are the script's that expands it)
    assert found.options_for("pretrain_other.py") == []


def test_a_named_variable_in_docs_is_a_placeholder_but_in_a_script_it_may_pass_options():
    readme, script = Launches(), Launches()
    add_launch_text(readme, "./tools/dist_launch.sh train.py /path/to/config $GPUS_PER_NODE\n", docs=True)
    add_launch_text(script, "./tools/dist_launch.sh train.py /path/to/config $GPUS_PER_NODE\n")
    assert readme.options_for("train.py") == []
    assert ANY_OPTION in script.options_for("train.py")
    passed_on = Launches()
    add_launch_text(passed_on, "python train.py --lr 1 $@\n", docs=True)
    assert ANY_OPTION in passed_on.options_for("train.py")


def test_a_variable_that_names_the_script_passes_no_options():
    found = launches("python ${alg}.py --world-size 1 --amp False\n")
    assert ANY_OPTION not in found.free and "amp" in found.free


def test_a_default_declared_true_is_not_taken_where_every_config_sets_the_key_false(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.yaml").write_text("amp: False\n")
    (tmp_path / "configs" / "b.yaml").write_text("amp: False\n")
    found = read_launches(str(tmp_path))
    found.note_code('parser.add_argument("--amp", default=True)\n')
    assert "amp" in found.switched_off()
    (tmp_path / "configs" / "b.yaml").write_text("amp: True\n")
    found = read_launches(str(tmp_path))
    found.note_code('parser.add_argument("--amp", default=True)\n')
    assert "amp" not in found.switched_off()
    # with no config setting the key, the declaration is what a run takes
    (tmp_path / "bare").mkdir()
    found = read_launches(str(tmp_path / "bare"))
    found.note_code('parser.add_argument("--amp", default=True)\n')
    assert "amp" in found.switched_on()


def test_the_values_of_a_list_option_give_no_option():
    text = 'DATA_DIRS=""\nfor dir in data/*/; do\n    DATA_DIRS="$DATA_DIRS $dir"\ndone\npython train.py --data_dirs $DATA_DIRS --epochs 3\n'
    assert launches(text).options_for("train.py") == ["data_dirs", "epochs"]
    assert ANY_OPTION in launches("python train.py --lr $LR $EXTRA_ARGS\n").options_for("train.py")


def test_other_programs_lines_and_what_echo_prints_give_no_option():
    found = launches(
        'wget -c --progress=bar:force "$URL" -O data.tar\n'
        'GPU=$(nvidia-smi --query-gpu=name --format=csv)\n'
        "pip install flash-attn --no-build-isolation\n"
        'echo "Downloaded: $(numfmt --to=iec $SIZE)"\n'
    )
    assert ANY_OPTION not in found.free  # (what echo prints stays prose: its words may name options, never pass them on)
    assert not found.free & {"progress", "query_gpu", "format", "no_build_isolation"}
    assert ANY_OPTION in launches("torchrun --nproc_per_node=2 $SCRIPT \"$@\"\n").free
