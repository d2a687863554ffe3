"""Retention: models can be pinned against expiry; kernel rows carry their size for the
cache's byte cap (existing rows get theirs computed here).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('models') as batch:
        batch.add_column(sa.Column('pinned', sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table('kernels') as batch:
        batch.add_column(sa.Column('size_bytes', sa.BigInteger(), server_default='0', nullable=False))
    # length() is bytes for a binary column on both dialects, characters for text: close enough
    # for rows written before sizes were kept (new rows store their exact byte count).
    op.execute('UPDATE kernels SET size_bytes = length(source) + length("binary") + length(te_json)')


def downgrade() -> None:
    with op.batch_alter_table('kernels') as batch:
        batch.drop_column('size_bytes')
    with op.batch_alter_table('models') as batch:
        batch.drop_column('pinned')
