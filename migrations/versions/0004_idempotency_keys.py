"""Idempotency keys of compilation requests: a retried submission returns the jobs the
first one created.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('idempotency_keys',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=32), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('request_sha256', sa.String(length=64), nullable=False),
    sa.Column('model_id', sa.String(length=32), nullable=False),
    sa.Column('job_ids', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'],
                            name=op.f('fk_idempotency_keys_model_id_models'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'],
                            name=op.f('fk_idempotency_keys_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_idempotency_keys')),
    sa.UniqueConstraint('tenant_id', 'key', name=op.f('uq_idempotency_keys_tenant_id'))
    )
    op.create_index(op.f('ix_idempotency_keys_model_id'), 'idempotency_keys', ['model_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_idempotency_keys_model_id'), table_name='idempotency_keys')
    op.drop_table('idempotency_keys')
