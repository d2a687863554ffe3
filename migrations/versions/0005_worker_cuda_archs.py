"""The CUDA archs a worker's GPU runs (CUDA jobs are routed to a worker that validates them).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('workers') as batch:
        batch.add_column(sa.Column('cuda_archs', sa.JSON(), nullable=False, server_default='[]'))


def downgrade() -> None:
    with op.batch_alter_table('workers') as batch:
        batch.drop_column('cuda_archs')
