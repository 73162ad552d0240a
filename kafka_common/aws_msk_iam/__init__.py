"""AWS MSK IAM sign-in with no jar: where the AWS credentials come from (``credentials``,
``sts``) and how the ``AWS_MSK_IAM`` and OAUTHBEARER options become mechanism factories
(``options``). The signing itself is sans-IO, in ``protocol.sasl_aws_msk_iam``.
"""
