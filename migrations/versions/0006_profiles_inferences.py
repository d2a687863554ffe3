"""Profile and inference jobs: a kind on every job (compile jobs are `compile`), and
`run_jobs`, what a profile or inference job runs and what it found.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('kind', sa.String(length=16), server_default='compile', nullable=False))
    op.create_table('run_jobs',
    sa.Column('job_id', sa.String(length=32), nullable=False),
    sa.Column('artifact_id', sa.String(length=32), nullable=False),
    sa.Column('inputs_sha256', sa.String(length=64), nullable=True),
    sa.Column('outputs_sha256', sa.String(length=64), nullable=True),
    sa.Column('outputs_size', sa.Integer(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['artifact_id'], ['artifacts.id'],
                            name=op.f('fk_run_jobs_artifact_id_artifacts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_run_jobs_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_run_jobs'))
    )
    op.create_index(op.f('ix_run_jobs_artifact_id'), 'run_jobs', ['artifact_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_run_jobs_artifact_id'), table_name='run_jobs')
    op.drop_table('run_jobs')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('kind')
