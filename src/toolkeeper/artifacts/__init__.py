"""Large results stored aside: a content-addressed store and the projection that decides
what of a result the model reads."""

from toolkeeper.artifacts.store import ArtifactError, ArtifactStore, Projection, project_result

__all__ = ["ArtifactError", "ArtifactStore", "Projection", "project_result"]
