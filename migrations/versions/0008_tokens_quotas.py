"""Token expiry, scope and last use; per-tenant limits and private kernel namespaces; jobs
held back by the per-tenant dispatch window.

Touches only its own columns and table, so it may follow any revision that keeps
`tokens`, `jobs` and `kernels`.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tokens') as batch:
        batch.add_column(sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('scope', sa.String(length=8), server_default='write', nullable=False))
        batch.add_column(sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('held', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch.create_index(batch.f('ix_jobs_held'), ['held'], unique=False)
    with op.batch_alter_table('kernels') as batch:
        batch.add_column(sa.Column('namespace', sa.String(length=32), nullable=True))
        batch.create_index(batch.f('ix_kernels_namespace'), ['namespace'], unique=False)
    op.create_table('tenant_limits',
    sa.Column('tenant_id', sa.String(length=32), nullable=False),
    sa.Column('max_stored_bytes', sa.BigInteger(), nullable=True),
    sa.Column('max_models', sa.Integer(), nullable=True),
    sa.Column('max_active_jobs', sa.Integer(), nullable=True),
    sa.Column('requests_per_minute', sa.Integer(), nullable=True),
    sa.Column('private_kernels', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'],
                            name=op.f('fk_tenant_limits_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tenant_id', name=op.f('pk_tenant_limits'))
    )


def downgrade() -> None:
    op.drop_table('tenant_limits')
    with op.batch_alter_table('kernels') as batch:
        batch.drop_index(batch.f('ix_kernels_namespace'))
        batch.drop_column('namespace')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_index(batch.f('ix_jobs_held'))
        batch.drop_column('held')
    with op.batch_alter_table('tokens') as batch:
        batch.drop_column('last_used_at')
        batch.drop_column('scope')
        batch.drop_column('expires_at')
