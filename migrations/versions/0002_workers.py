"""Workers and the CPU models their hosts run (routing of jobs to a host that can validate them).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('workers',
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('cpu_models', sa.JSON(), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_workers'))
    )
    op.create_index(op.f('ix_workers_last_seen'), 'workers', ['last_seen'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_workers_last_seen'), table_name='workers')
    op.drop_table('workers')
