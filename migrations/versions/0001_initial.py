"""Initial schema: tenants, tokens, models, jobs, artifacts, kernels.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('kernels',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('op_pattern', sa.String(length=255), nullable=False),
    sa.Column('shapes', sa.Text(), nullable=False),
    sa.Column('dtypes', sa.String(length=255), nullable=False),
    sa.Column('te_hash', sa.String(length=64), nullable=False),
    sa.Column('target_fingerprint', sa.String(length=128), nullable=False),
    sa.Column('compiler_fingerprint', sa.String(length=64), nullable=False),
    sa.Column('options', sa.Text(), nullable=False),
    sa.Column('tile_config', sa.JSON(), nullable=False),
    sa.Column('te_json', sa.Text(), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('binary', sa.LargeBinary(), nullable=False),
    sa.Column('estimated_us', sa.Float(), nullable=True),
    sa.Column('measured_us', sa.Float(), nullable=True),
    sa.Column('validation_error', sa.Float(), nullable=True),
    sa.Column('extras', sa.JSON(), nullable=False),
    sa.Column('hit_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('stale', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_kernels'))
    )
    op.create_index(op.f('ix_kernels_compiler_fingerprint'), 'kernels', ['compiler_fingerprint'])
    op.create_index(op.f('ix_kernels_op_pattern'), 'kernels', ['op_pattern'])
    op.create_index(op.f('ix_kernels_stale'), 'kernels', ['stale'])
    op.create_index(op.f('ix_kernels_target_fingerprint'), 'kernels', ['target_fingerprint'])

    op.create_table('tenants',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tenants')),
    sa.UniqueConstraint('name', name=op.f('uq_tenants_name'))
    )
    op.create_table('models',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=32), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('inputs', sa.JSON(), nullable=False),
    sa.Column('outputs', sa.JSON(), nullable=False),
    sa.Column('op_histogram', sa.JSON(), nullable=False),
    sa.Column('parameters', sa.Integer(), nullable=False),
    sa.Column('opset', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_models_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_models')),
    sa.UniqueConstraint('tenant_id', 'sha256', name=op.f('uq_models_tenant_id'))
    )
    op.create_index(op.f('ix_models_sha256'), 'models', ['sha256'])
    op.create_index(op.f('ix_models_tenant_id'), 'models', ['tenant_id'])

    op.create_table('tokens',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=32), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_tokens_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_tokens_token_hash'))
    )
    op.create_index(op.f('ix_tokens_tenant_id'), 'tokens', ['tenant_id'])

    op.create_table('jobs',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=32), nullable=False),
    sa.Column('model_id', sa.String(length=32), nullable=False),
    sa.Column('target', sa.String(length=64), nullable=False),
    sa.Column('target_kind', sa.String(length=16), nullable=False),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('stage', sa.String(length=32), nullable=True),
    sa.Column('progress', sa.Float(), nullable=False),
    sa.Column('stage_seconds', sa.JSON(), nullable=False),
    sa.Column('cache_hits', sa.Integer(), nullable=True),
    sa.Column('cache_misses', sa.Integer(), nullable=True),
    sa.Column('validation', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('worker', sa.String(length=255), nullable=True),
    sa.Column('task_id', sa.String(length=64), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_jobs_model_id_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_jobs_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs'))
    )
    op.create_index(op.f('ix_jobs_model_id'), 'jobs', ['model_id'])
    op.create_index('ix_jobs_status_lease', 'jobs', ['status', 'lease_expires_at'])
    op.create_index(op.f('ix_jobs_tenant_id'), 'jobs', ['tenant_id'])

    op.create_table('artifacts',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=32), nullable=False),
    sa.Column('job_id', sa.String(length=32), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('report', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_artifacts_job_id_jobs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_artifacts_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_artifacts')),
    sa.UniqueConstraint('job_id', name=op.f('uq_artifacts_job_id'))
    )
    op.create_index(op.f('ix_artifacts_sha256'), 'artifacts', ['sha256'])
    op.create_index(op.f('ix_artifacts_tenant_id'), 'artifacts', ['tenant_id'])



def downgrade() -> None:
    op.drop_index(op.f('ix_artifacts_tenant_id'), table_name='artifacts')
    op.drop_index(op.f('ix_artifacts_sha256'), table_name='artifacts')

    op.drop_table('artifacts')
    op.drop_index(op.f('ix_jobs_tenant_id'), table_name='jobs')
    op.drop_index('ix_jobs_status_lease', table_name='jobs')
    op.drop_index(op.f('ix_jobs_model_id'), table_name='jobs')

    op.drop_table('jobs')
    op.drop_index(op.f('ix_tokens_tenant_id'), table_name='tokens')

    op.drop_table('tokens')
    op.drop_index(op.f('ix_models_tenant_id'), table_name='models')
    op.drop_index(op.f('ix_models_sha256'), table_name='models')

    op.drop_table('models')
    op.drop_table('tenants')
    op.drop_index(op.f('ix_kernels_target_fingerprint'), table_name='kernels')
    op.drop_index(op.f('ix_kernels_stale'), table_name='kernels')
    op.drop_index(op.f('ix_kernels_op_pattern'), table_name='kernels')
    op.drop_index(op.f('ix_kernels_compiler_fingerprint'), table_name='kernels')

    op.drop_table('kernels')
