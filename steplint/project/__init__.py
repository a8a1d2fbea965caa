"""The project index (DESIGN.md §3): module imports and per-function step-effect summaries, so that
the model of one module sees the step that its functions share with the rest of the project."""
